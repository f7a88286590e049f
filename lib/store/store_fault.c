/* store_fault.c: the fault-injection VFS (store_fault.h). It wraps the
 * default VFS: every file call goes to the real file, after counting and
 * the armed fault's check. For crash simulation each file keeps an undo
 * log of the writes since its last sync (the bytes they replaced below the
 * synced size, and how far they grew the file); a crash plays it back
 * (all entries, or a random subset) and truncates, then fails every call. */
#include "store_fault.h"

#include "base/base.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* One write (or truncation) since the last sync. */
typedef struct fault_undo {
    sqlite3_int64 off;
    int len;               /* bytes written (or, for a truncation, cut) */
    unsigned char *old;    /* what [off, off + old_len) held before */
    int old_len;           /* the part of the range below the synced size */
} fault_undo;

typedef struct fault_file fault_file;

struct store_fault {
    sqlite3_vfs vfs;   /* what SQLite sees; vfs.pAppData points back here */
    sqlite3_vfs *base; /* the wrapped default VFS */
    char *name;
    store_fault_kind kind;
    long nth;
    bool persistent;
    uint64_t rng;      /* crash: 0 = undo everything */
    long writes, syncs;
    bool fired, crashed;
    fault_file *files; /* open files, for the crash */
};

struct fault_file {
    sqlite3_file base;   /* must come first: SQLite's view */
    sqlite3_file *real;  /* the wrapped file (sqlite3_malloc'd, base->szOsFile) */
    store_fault *f;
    sqlite3_int64 synced_size;
    fault_undo *undo;
    size_t n_undo, cap_undo;
    fault_file *next;
};

/* ---- helpers ---- */

static uint64_t next_rand(uint64_t *s)
{
    /* xorshift64*: a seeded, repeatable choice of which writes survive */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void undo_clear(fault_file *ff)
{
    for (size_t i = 0; i < ff->n_undo; i++) free(ff->undo[i].old);
    ff->n_undo = 0;
}

static sqlite3_int64 real_size(fault_file *ff)
{
    sqlite3_int64 sz = 0;
    if (ff->real->pMethods->xFileSize(ff->real, &sz) != SQLITE_OK) sz = 0;
    return sz;
}

/* Records what a write or truncation of [off, off + len) replaces. */
static void undo_record(fault_file *ff, sqlite3_int64 off, int len)
{
    if (ff->n_undo == ff->cap_undo) {
        ff->cap_undo = ff->cap_undo ? ff->cap_undo * 2 : 16;
        ff->undo = xrealloc(ff->undo, ff->cap_undo * sizeof *ff->undo);
    }
    fault_undo *u = &ff->undo[ff->n_undo++];
    u->off = off;
    u->len = len;
    u->old = NULL;
    u->old_len = 0;
    sqlite3_int64 keep_end = ff->synced_size < off + len ? ff->synced_size : off + len;
    if (keep_end > off) {
        u->old_len = (int)(keep_end - off);
        u->old = xcalloc(1, (size_t)u->old_len);
        /* A short read leaves zeros, which is what the file held. */
        ff->real->pMethods->xRead(ff->real, u->old, u->old_len, off);
    }
}

/* The machine "loses power": unsynced changes are undone (or, with a seed,
 * a random subset of them), newest first, then the file gets the size its
 * surviving writes give it. */
static void crash_file(store_fault *f, fault_file *ff)
{
    sqlite3_int64 size = ff->synced_size;
    static const unsigned char zeros[4096];
    for (size_t k = ff->n_undo; k-- > 0;) {
        fault_undo *u = &ff->undo[k];
        bool survives = f->rng && (next_rand(&f->rng) & 1);
        if (survives) {
            if (u->off + u->len > size) size = u->off + u->len;
            continue;
        }
        if (u->old_len) ff->real->pMethods->xWrite(ff->real, u->old, u->old_len, u->off);
        /* The part beyond the synced size never reached the disk: zeros
         * where a later surviving write keeps the file longer. */
        for (sqlite3_int64 o = u->off + u->old_len; o < u->off + u->len;) {
            int n = (int)(u->off + u->len - o < (sqlite3_int64)sizeof zeros
                              ? u->off + u->len - o
                              : (sqlite3_int64)sizeof zeros);
            if (o < real_size(ff)) ff->real->pMethods->xWrite(ff->real, zeros, n, o);
            o += n;
        }
    }
    ff->real->pMethods->xTruncate(ff->real, size);
    ff->real->pMethods->xSync(ff->real, SQLITE_SYNC_FULL);
    undo_clear(ff);
    ff->synced_size = size;
}

static void crash(store_fault *f)
{
    if (f->crashed) return;
    f->crashed = true;
    f->fired = true;
    for (fault_file *ff = f->files; ff; ff = ff->next) crash_file(f, ff);
}

/* Decides the fate of one write or sync: 0 = go on, else the error code. */
static int check_fault(store_fault *f, bool is_sync)
{
    if (f->crashed) return is_sync ? SQLITE_IOERR_FSYNC : SQLITE_IOERR_WRITE;
    long count = is_sync ? ++f->syncs : ++f->writes;
    store_fault_kind k = f->kind;
    bool mine = is_sync ? (k == STORE_FAULT_SYNC || k == STORE_FAULT_CRASH_SYNC)
                        : (k == STORE_FAULT_WRITE || k == STORE_FAULT_FULL ||
                           k == STORE_FAULT_CRASH_WRITE);
    if (!mine || f->nth <= 0) return 0;
    bool crash_kind = k == STORE_FAULT_CRASH_SYNC || k == STORE_FAULT_CRASH_WRITE;
    if (!(count == f->nth || (count > f->nth && f->persistent && !crash_kind))) return 0;
    f->fired = true;
    if (crash_kind) {
        crash(f);
        return is_sync ? SQLITE_IOERR_FSYNC : SQLITE_IOERR_WRITE;
    }
    if (k == STORE_FAULT_FULL) return SQLITE_FULL;
    return is_sync ? SQLITE_IOERR_FSYNC : SQLITE_IOERR_WRITE;
}

/* ---- file methods ---- */

#define REAL(file) (((fault_file *)(file))->real)
#define FAULT(file) (((fault_file *)(file))->f)

static int ff_close(sqlite3_file *file)
{
    fault_file *ff = (fault_file *)file;
    fault_file **pp = &ff->f->files;
    while (*pp && *pp != ff) pp = &(*pp)->next;
    if (*pp) *pp = ff->next;
    int rc = ff->real->pMethods ? ff->real->pMethods->xClose(ff->real) : SQLITE_OK;
    undo_clear(ff);
    free(ff->undo);
    sqlite3_free(ff->real);
    return rc;
}

static int ff_read(sqlite3_file *file, void *buf, int n, sqlite3_int64 off)
{
    if (FAULT(file)->crashed) return SQLITE_IOERR_READ;
    return REAL(file)->pMethods->xRead(REAL(file), buf, n, off);
}

static int ff_write(sqlite3_file *file, const void *buf, int n, sqlite3_int64 off)
{
    fault_file *ff = (fault_file *)file;
    int rc = check_fault(ff->f, false);
    if (rc) return rc;
    undo_record(ff, off, n);
    return ff->real->pMethods->xWrite(ff->real, buf, n, off);
}

static int ff_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    fault_file *ff = (fault_file *)file;
    if (ff->f->crashed) return SQLITE_IOERR_TRUNCATE;
    sqlite3_int64 cur = real_size(ff);
    if (size < cur) undo_record(ff, size, (int)(cur - size));
    return ff->real->pMethods->xTruncate(ff->real, size);
}

static int ff_sync(sqlite3_file *file, int flags)
{
    fault_file *ff = (fault_file *)file;
    int rc = check_fault(ff->f, true);
    if (rc) return rc;
    rc = ff->real->pMethods->xSync(ff->real, flags);
    if (rc == SQLITE_OK) {
        undo_clear(ff);
        ff->synced_size = real_size(ff);
    }
    return rc;
}

static int ff_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    if (FAULT(file)->crashed) return SQLITE_IOERR_FSTAT;
    return REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int ff_lock(sqlite3_file *file, int lock)
{
    return REAL(file)->pMethods->xLock(REAL(file), lock);
}

static int ff_unlock(sqlite3_file *file, int lock)
{
    return REAL(file)->pMethods->xUnlock(REAL(file), lock);
}

static int ff_check_reserved(sqlite3_file *file, int *out)
{
    return REAL(file)->pMethods->xCheckReservedLock(REAL(file), out);
}

static int ff_file_control(sqlite3_file *file, int op, void *arg)
{
    return REAL(file)->pMethods->xFileControl(REAL(file), op, arg);
}

static int ff_sector_size(sqlite3_file *file)
{
    return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int ff_device_characteristics(sqlite3_file *file)
{
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

static int ff_shm_map(sqlite3_file *file, int region, int size, int extend, void volatile **pp)
{
    if (FAULT(file)->crashed) return SQLITE_IOERR_SHMMAP;
    return REAL(file)->pMethods->xShmMap(REAL(file), region, size, extend, pp);
}

static int ff_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, n, flags);
}

static void ff_shm_barrier(sqlite3_file *file)
{
    REAL(file)->pMethods->xShmBarrier(REAL(file));
}

static int ff_shm_unmap(sqlite3_file *file, int delete_flag)
{
    return REAL(file)->pMethods->xShmUnmap(REAL(file), delete_flag);
}

/* Version 2: shared memory for WAL, but no memory-mapped reads (xFetch),
 * so every read and write passes through the methods above. */
static const sqlite3_io_methods fault_io = {
    2,
    ff_close,
    ff_read,
    ff_write,
    ff_truncate,
    ff_sync,
    ff_file_size,
    ff_lock,
    ff_unlock,
    ff_check_reserved,
    ff_file_control,
    ff_sector_size,
    ff_device_characteristics,
    ff_shm_map,
    ff_shm_lock,
    ff_shm_barrier,
    ff_shm_unmap,
    NULL,
    NULL,
};

/* ---- VFS methods ---- */

#define BASE(vfs) (((store_fault *)(vfs)->pAppData)->base)

static int fv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out)
{
    store_fault *f = vfs->pAppData;
    fault_file *ff = (fault_file *)file;
    memset(ff, 0, sizeof *ff);
    ff->real = sqlite3_malloc(f->base->szOsFile);
    if (!ff->real) return SQLITE_NOMEM;
    memset(ff->real, 0, (size_t)f->base->szOsFile);
    int rc = f->crashed ? SQLITE_CANTOPEN : f->base->xOpen(f->base, name, ff->real, flags, out);
    if (rc != SQLITE_OK) {
        sqlite3_free(ff->real);
        ff->real = NULL;
        return rc;
    }
    ff->f = f;
    ff->synced_size = real_size(ff);
    ff->next = f->files;
    f->files = ff;
    file->pMethods = &fault_io;
    return SQLITE_OK;
}

static int fv_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    if (((store_fault *)vfs->pAppData)->crashed) return SQLITE_IOERR_DELETE;
    return BASE(vfs)->xDelete(BASE(vfs), name, sync_dir);
}

static int fv_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    return BASE(vfs)->xAccess(BASE(vfs), name, flags, out);
}

static int fv_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    return BASE(vfs)->xFullPathname(BASE(vfs), name, n, out);
}

static void *fv_dl_open(sqlite3_vfs *vfs, const char *name)
{
    return BASE(vfs)->xDlOpen(BASE(vfs), name);
}

static void fv_dl_error(sqlite3_vfs *vfs, int n, char *msg)
{
    BASE(vfs)->xDlError(BASE(vfs), n, msg);
}

static void (*fv_dl_sym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    return BASE(vfs)->xDlSym(BASE(vfs), h, sym);
}

static void fv_dl_close(sqlite3_vfs *vfs, void *h)
{
    BASE(vfs)->xDlClose(BASE(vfs), h);
}

static int fv_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    return BASE(vfs)->xRandomness(BASE(vfs), n, out);
}

static int fv_sleep(sqlite3_vfs *vfs, int us)
{
    return BASE(vfs)->xSleep(BASE(vfs), us);
}

static int fv_current_time(sqlite3_vfs *vfs, double *out)
{
    return BASE(vfs)->xCurrentTime(BASE(vfs), out);
}

static int fv_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    return BASE(vfs)->xGetLastError ? BASE(vfs)->xGetLastError(BASE(vfs), n, out) : 0;
}

static int fv_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    return BASE(vfs)->xCurrentTimeInt64(BASE(vfs), out);
}

/* ---- public ---- */

store_fault *store_fault_new(const char *name)
{
    sqlite3_initialize();
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (!base || base->iVersion < 2 || !name || sqlite3_vfs_find(name)) return NULL;
    store_fault *f = xcalloc(1, sizeof *f);
    f->base = base;
    f->name = xstrdup(name);
    sqlite3_vfs *v = &f->vfs;
    v->iVersion = 2;
    v->szOsFile = (int)sizeof(fault_file);
    v->mxPathname = base->mxPathname;
    v->zName = f->name;
    v->pAppData = f;
    v->xOpen = fv_open;
    v->xDelete = fv_delete;
    v->xAccess = fv_access;
    v->xFullPathname = fv_full_pathname;
    v->xDlOpen = fv_dl_open;
    v->xDlError = fv_dl_error;
    v->xDlSym = fv_dl_sym;
    v->xDlClose = fv_dl_close;
    v->xRandomness = fv_randomness;
    v->xSleep = fv_sleep;
    v->xCurrentTime = fv_current_time;
    v->xGetLastError = fv_last_error;
    v->xCurrentTimeInt64 = fv_current_time_int64;
    if (sqlite3_vfs_register(v, 0) != SQLITE_OK) {
        free(f->name);
        free(f);
        return NULL;
    }
    return f;
}

void store_fault_free(store_fault *f)
{
    if (!f) return;
    sqlite3_vfs_unregister(&f->vfs);
    free(f->name);
    free(f);
}

const char *store_fault_vfs_name(const store_fault *f)
{
    return f->name;
}

void store_fault_arm(store_fault *f, store_fault_kind kind, long nth, bool persistent,
                     uint64_t seed)
{
    f->kind = kind;
    f->nth = nth;
    f->persistent = persistent;
    f->rng = seed;
    f->writes = f->syncs = 0;
    f->fired = f->crashed = false;
}

void store_fault_disarm(store_fault *f)
{
    f->kind = STORE_FAULT_NONE;
    f->crashed = false;
}

void store_fault_crash_now(store_fault *f)
{
    crash(f);
}

long store_fault_writes(const store_fault *f)
{
    return f->writes;
}

long store_fault_syncs(const store_fault *f)
{
    return f->syncs;
}

bool store_fault_fired(const store_fault *f)
{
    return f->fired;
}

bool store_fault_crashed(const store_fault *f)
{
    return f->crashed;
}
