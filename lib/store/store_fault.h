/* store_fault.h: fault injection under the store, in the SQLite style.
 *
 * A store_fault is an sqlite3_vfs that wraps the default one and passes
 * every call through, counting writes and syncs. Armed, it can:
 *
 *   - fail the Nth write or the Nth sync (once, or that one and every one
 *     after it), as a full disk or a failing device would: the store must
 *     report STORE_ERROR and leave the database as it was;
 *   - simulate a crash of the machine at the Nth write or sync: every write
 *     since each file's last sync is undone (all of them, or a random subset
 *     chosen by a seed, as a disk may have written some), and from then on
 *     every call fails, so nothing more reaches the files. After closing
 *     the handle, reopening the database with the default VFS shows what a
 *     machine would find after a power cut: every change acknowledged
 *     before the crash must be there.
 *
 * Tests open the store with store_options.vfs = store_fault_vfs_name(f).
 * The VFS is registered with SQLite under the given name while f exists
 * (SQLite keeps the list of VFSes; lathe keeps no global state of its own).
 * Use one store_fault per test, from one thread.
 */
#ifndef LATHE_STORE_FAULT_H
#define LATHE_STORE_FAULT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct store_fault store_fault;

typedef enum {
    STORE_FAULT_NONE,        /* pass everything through */
    STORE_FAULT_WRITE,       /* the Nth write fails (SQLITE_IOERR_WRITE) */
    STORE_FAULT_FULL,        /* the Nth write fails with SQLITE_FULL (disk full) */
    STORE_FAULT_SYNC,        /* the Nth sync fails (SQLITE_IOERR_FSYNC) */
    STORE_FAULT_CRASH_WRITE, /* the machine crashes instead of the Nth write */
    STORE_FAULT_CRASH_SYNC   /* the machine crashes instead of the Nth sync */
} store_fault_kind;

/* Registers a fault VFS named `name` (not the default VFS). NULL when the
 * name is taken or SQLite refuses. */
store_fault *store_fault_new(const char *name);
/* Unregisters and frees. Every database opened through it must be closed. */
void store_fault_free(store_fault *f);
const char *store_fault_vfs_name(const store_fault *f);

/* Arms a fault at the nth (1-based) write or sync counted from now.
 * persistent: every later write / sync fails too (ignored for crashes,
 * after which everything fails). seed: for crashes, 0 undoes every unsynced
 * write; any other value keeps a random subset of them chosen by the seed.
 * Resets the counters and the fired / crashed flags. */
void store_fault_arm(store_fault *f, store_fault_kind kind, long nth, bool persistent,
                     uint64_t seed);
/* Disarms, and ends a crash (the machine is back: files open again).
 * Counting goes on. */
void store_fault_disarm(store_fault *f);
/* Simulates a crash now (as an armed crash would). */
void store_fault_crash_now(store_fault *f);

/* Writes / syncs seen since the last arm. */
long store_fault_writes(const store_fault *f);
long store_fault_syncs(const store_fault *f);
/* Whether the armed fault happened (an injected error was returned, or the
 * crash took place). */
bool store_fault_fired(const store_fault *f);
bool store_fault_crashed(const store_fault *f);

#endif
