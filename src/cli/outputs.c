/*
 * outputs.c - how the voxconv CLI writes its files, and the process state that goes with it.
 *
 * Every output goes through the library's atomic outputs (vc_output: a temporary beside the
 * target, renamed over it when complete). A command's outputs are published together: every
 * temporary is written first, and the renames happen only when all of them succeeded; any
 * failure removes the temporaries and leaves every target as it was.
 *
 * The process state is the CLI's, never the library's: SIGXFSZ is ignored (a file-size limit
 * becomes a write error with a message, not a kill), and SIGINT, SIGTERM and SIGHUP (unless
 * ignored when the process started) unlink the temporaries registered here, with
 * async-signal-safe calls only, then re-raise the signal with its default action. The signals
 * are blocked while a temporary is created and registered, and while it is renamed and
 * unregistered, so the handler never misses a temporary nor removes a published file.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define MAX_TEMPS 64
static const int CLEANUP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};
#define NSIGNALS ((int)(sizeof CLEANUP_SIGNALS / sizeof CLEANUP_SIGNALS[0]))

/* Copies of the registered temporaries' paths (NULL: free slot). */
static char *volatile g_temps[MAX_TEMPS];

static void on_signal(int sig)
{
    for (int i = 0; i < MAX_TEMPS; i++)
        if (g_temps[i]) unlink(g_temps[i]);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns: the default action, the right status */
}

void cli_signals_init(void)
{
    signal(SIGXFSZ, SIG_IGN);
    for (int i = 0; i < NSIGNALS; i++) {
        struct sigaction old;
        if (sigaction(CLEANUP_SIGNALS[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue; /* e.g. nohup, or a background job: keep ignoring it */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigfillset(&sa.sa_mask);
        sigaction(CLEANUP_SIGNALS[i], &sa, NULL);
    }
}

static void block_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < NSIGNALS; i++) sigaddset(&set, CLEANUP_SIGNALS[i]);
    sigprocmask(SIG_BLOCK, &set, old);
}

/* Registers a copy of o's temporary (if it has one); -1 when it has none. */
static int register_temp(vc_output *o)
{
    const char *tmp = NULL;
    vc_output_temp_path(o, &tmp);
    if (!tmp) return -1;
    for (int i = 0; i < MAX_TEMPS; i++)
        if (!g_temps[i]) {
            size_t n = strlen(tmp) + 1;
            char *copy = malloc(n);
            if (copy) memcpy(copy, tmp, n);
            g_temps[i] = copy;
            return i;
        }
    return -1; /* more than MAX_TEMPS at once: never, commands write at most a few */
}

static void unregister_temp(int slot)
{
    if (slot < 0) return;
    char *p = g_temps[slot];
    g_temps[slot] = NULL;
    free(p);
}

/* Writes one output into its open vc_output (tune: the context's tune cache). */
static vc_status write_one(vc_context *ctx, const cli_output *w, vc_output *o, int tune)
{
    if (tune) return vc_tune_cache_save_output(ctx, o);
    if (w->tensor) return vc_tensor_save_output(ctx, w->tensor, o);
    if (w->text) return vc_output_write_bytes(ctx, o, w->text, w->text_len);
    return vc_npy_write_output(ctx, o, &w->array);
}

static int write_outputs(const char *cmd, vc_context *ctx, const cli_output *outs, int n,
                         int tune)
{
    vc_output *o[CLI_MAX_OUTPUTS] = {NULL};
    int slot[CLI_MAX_OUTPUTS];
    if (n > CLI_MAX_OUTPUTS) return cli_error(cmd, "too many outputs (%d)", n);
    sigset_t old;
    int i, rc = CLI_OK;
    for (i = 0; i < n && rc == CLI_OK; i++) {
        block_signals(&old);
        vc_status st = vc_output_open(ctx, outs[i].path, &o[i]);
        slot[i] = st == VC_OK ? register_temp(o[i]) : -1;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (st == VC_OK) st = write_one(ctx, &outs[i], o[i], tune);
        if (st != VC_OK) rc = cli_file_error(cmd, ctx, st, "cannot write", outs[i].path);
    }
    int opened = i;
    for (i = 0; i < opened; i++) {
        block_signals(&old);
        vc_status st = VC_OK;
        if (rc == CLI_OK) st = vc_output_publish(ctx, o[i]);
        else vc_output_discard(o[i]);
        unregister_temp(slot[i]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (st != VC_OK) rc = cli_file_error(cmd, ctx, st, "cannot write", outs[i].path);
    }
    return rc;
}

int cli_write_outputs(const char *cmd, vc_context *ctx, const cli_output *outs, int n)
{
    return write_outputs(cmd, ctx, outs, n, 0);
}

int cli_write_tune_cache(const char *cmd, vc_context *ctx, const char *path)
{
    const cli_output one = {path, NULL, {0}, NULL, 0};
    return write_outputs(cmd, ctx, &one, 1, 1);
}

/* The extensions of the files this tool reads or writes. */
static const char *const KNOWN_EXTENSIONS[] = {".vxt", ".npy", ".bin", ".pcd", ".ply", NULL};

int cli_check_extension(const char *cmd, const char *what, const char *path, const char *ext)
{
    const char *base = strrchr(path, '/');
    const char *dot = strrchr(base ? base + 1 : path, '.');
    if (!dot || dot == (base ? base + 1 : path)) return CLI_OK;
    for (int i = 0; KNOWN_EXTENSIONS[i]; i++) {
        const char *k = KNOWN_EXTENSIONS[i];
        if (strlen(dot) != strlen(k)) continue;
        int same = 1;
        for (size_t j = 0; k[j]; j++)
            if ((dot[j] | 0x20) != k[j]) same = 0;
        if (!same) continue;
        if (strcmp(k, ext) == 0) return CLI_OK;
        return cli_usage_error(cmd, "%s '%s' ends in %s but is written as a %s file; give it "
                               "a %s name", what, path, dot, ext, ext);
    }
    return CLI_OK;
}
