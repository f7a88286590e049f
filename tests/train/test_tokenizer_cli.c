/* test_tokenizer_cli.c: `lathe tokenize` run as a program: ids, --decode,
 * --jsonl both ways (the Qwen test vectors through it), --data, and the
 * exit codes and file:line messages of bad input. Needs the lathe binary
 * of the same build (LATHE_BINARY_DIR/lathe). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/base.h"

#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LATHE LATHE_BINARY_DIR "/lathe"
#define QWEN LATHE_SOURCE_DIR "/share/tokenizers/qwen3"
#define LLAMA LATHE_SOURCE_DIR "/share/tokenizers/llama3"

typedef struct run_result {
    int rc;
    sb out, err;
} run_result;

/* Runs lathe with argv (NULL-terminated, argv[0] ignored), feeding `in`
 * on standard input; collects both outputs. */
static void run(const char *const *argv, const char *in, run_result *r)
{
    int pin[2], pout[2], perr[2];
    assert_int_equal(pipe(pin), 0);
    assert_int_equal(pipe(pout), 0);
    assert_int_equal(pipe(perr), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        execv(LATHE, (char *const *)argv);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    sb_init(&r->out);
    sb_init(&r->err);
    size_t inlen = in ? strlen(in) : 0, sent = 0;
    if (!inlen) close(pin[1]);
    struct pollfd fds[3] = {{pout[0], POLLIN, 0}, {perr[0], POLLIN, 0}, {inlen ? pin[1] : -1, POLLOUT, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        assert_true(poll(fds, 3, 60000) > 0);
        for (int k = 0; k < 2; k++)
            if (fds[k].fd >= 0 && fds[k].revents) {
                char buf[4096];
                ssize_t n = read(fds[k].fd, buf, sizeof buf);
                if (n <= 0) {
                    close(fds[k].fd);
                    fds[k].fd = -1;
                    open_fds--;
                } else {
                    sb_putn(k ? &r->err : &r->out, buf, (size_t)n);
                }
            }
        if (fds[2].fd >= 0 && fds[2].revents) {
            ssize_t n = write(fds[2].fd, in + sent, inlen - sent);
            if (n > 0) sent += (size_t)n;
            if (n <= 0 || sent == inlen) {
                close(fds[2].fd);
                fds[2].fd = -1;
            }
        }
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void done(run_result *r)
{
    sb_free(&r->out);
    sb_free(&r->err);
}

static void expect(const char *const *argv, const char *in, int rc, const char *out, const char *err_part)
{
    run_result r;
    run(argv, in, &r);
    if (r.rc != rc || (out && strcmp(sb_str(&r.out), out) != 0) ||
        (err_part && !strstr(sb_str(&r.err), err_part)))
        fail_msg("lathe %s %s: rc %d, stdout [%s], stderr [%s]", argv[1], argv[2] ? argv[2] : "",
                 r.rc, sb_str(&r.out), sb_str(&r.err));
    done(&r);
}

static void test_encode_decode(void **state)
{
    (void)state;
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "Hello world", NULL}, NULL, 0,
           "9707 1879\n", NULL);
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "-", NULL}, " Hello", 0, "21927\n", NULL);
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", LLAMA, "--decode", "9906, 1917", NULL}, NULL,
           0, "Hello world\n", NULL);
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", LLAMA, "--decode", "--skip-special",
                            "128000 9906 128009", NULL},
           NULL, 0, "Hello\n", NULL);
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--tokens", "Hello world", NULL}, NULL,
           0, "9707\t\"Hello\"\n1879\t\"\xc4\xa0world\"\n", NULL);
}

static void test_jsonl(void **state)
{
    (void)state;
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--jsonl", NULL},
           "\"Hello world\"\n\"\"\n\"<|im_end|>\\n\"\n", 0, "[9707, 1879]\n[]\n[151645, 198]\n", NULL);
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--jsonl", "--decode", NULL},
           "[9707, 1879]\n[]\n", 0, "\"Hello world\"\n\"\"\n", NULL);
    /* bad lines: the name and line number, exit 2 */
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--jsonl", NULL}, "\"a\"\n42\n\"b\"\n",
           2, NULL, "<stdin>:2: expected a JSON string");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--jsonl", NULL}, "\"a\"\n\"b\n", 2,
           NULL, "<stdin>:2:");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--jsonl", "--decode", NULL},
           "[1, 2]\n[1, -5]\n", 2, NULL, "<stdin>:2: element 1");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--jsonl", "--decode", NULL},
           "[999999999]\n", 2, NULL, "not in the vocabulary");
}

/* The llama.cpp qwen2 vectors, through --jsonl. */
static void test_vectors_through_cli(void **state)
{
    (void)state;
    char err[256];
    size_t ilen, olen;
    char *inp = file_read_all(LATHE_SOURCE_DIR "/tests/ref/tokenizers/testvectors/ggml-vocab-qwen2.gguf.inp",
                              1 << 20, &ilen, err, sizeof err);
    char *outv = file_read_all(LATHE_SOURCE_DIR "/tests/ref/tokenizers/testvectors/ggml-vocab-qwen2.gguf.out",
                               1 << 20, &olen, err, sizeof err);
    assert_non_null(inp);
    assert_non_null(outv);
    sb lines, want;
    sb_init(&lines);
    sb_init(&want);
    const char *sep = "\n__ggml_vocab_test__\n";
    for (char *p = inp, *end; (end = strstr(p, sep)); p = end + strlen(sep)) {
        json_t *s = json_stringn(p, (size_t)(end - p));
        char *d = json_dumps(s, JSON_ENCODE_ANY);
        sb_printf(&lines, "%s\n", d);
        free(d);
        json_decref(s);
    }
    for (char *o = outv, *eol; (eol = strchr(o, '\n')); o = eol + 1) {
        sb_putc(&want, '[');
        bool first = true;
        for (char *q = o; q < eol;) {
            char *next;
            long v = strtol(q, &next, 10);
            if (next == q) break;
            sb_printf(&want, first ? "%ld" : ", %ld", v);
            first = false;
            q = next;
        }
        sb_puts(&want, "]\n");
    }
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--jsonl", NULL}, lines.buf, 0,
           want.buf, NULL);
    sb_free(&lines);
    sb_free(&want);
    free(inp);
    free(outv);
}

static void test_data_and_errors(void **state)
{
    (void)state;
    run_result r;
    run((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--data",
                         LATHE_SOURCE_DIR "/share/data/self-instruct/seed_tasks.alpaca.jsonl", "--show", "0", NULL},
        NULL, &r);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out.buf, "chat template: qwen3"));
    assert_non_null(strstr(r.out.buf, "records: 175 kept, 0 skipped"));
    assert_non_null(strstr(r.out.buf, "[[<think>"));
    done(&r);
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--data", LATHE_TEST_DATA "/tok/bad_json.jsonl", NULL},
           NULL, 2, NULL, "bad_json.jsonl:2:");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--data", LATHE_TEST_DATA "/tok/bad_json.jsonl",
                            "--skip-bad", NULL},
           NULL, 0, NULL, "skipped");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--data", LATHE_TEST_DATA "/tok/text.jsonl",
                            "--chat-template", "lama3", NULL},
           NULL, 1, NULL, "did you mean 'llama3'");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", "/no/such/dir", "x", NULL}, NULL, 4, NULL,
           "/no/such/dir");
    expect((const char *[]){"lathe", "tokenize", "x", NULL}, NULL, 1, NULL, "--tokenizer");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--bogus", "1", NULL}, NULL, 1, NULL,
           "unknown option");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--decode", "12 abc", NULL}, NULL, 2,
           NULL, "argument:1: expected token ids");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "-i", LATHE_TEST_DATA "/tok/text.jsonl",
                            "--jsonl", NULL},
           NULL, 2, NULL, "text.jsonl:1: expected a JSON string");
    expect((const char *[]){"lathe", "tokenize", "--tokenizer", QWEN, "--info", NULL}, NULL, 0, NULL, NULL);
}

int main(void)
{
    if (access(LATHE, X_OK) != 0) {
        fprintf(stderr, "%s is not built; build the lathe target first\n", LATHE);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_decode),
        cmocka_unit_test(test_jsonl),
        cmocka_unit_test(test_vectors_through_cli),
        cmocka_unit_test(test_data_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
