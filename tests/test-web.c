/* test-web.c - `sluice web`'s JSON API and pages, driven with a real HTTP
 * client (libsoup's SoupSession) against `sluice web` and `sluice worker`
 * processes on a redis-server of the suite, in both modes.
 *
 * What the API shows is compared with what the command's own read
 * subcommands say (stats, ls, dlq list, inspect): the dashboard must show
 * the broker, not a story of its own. Every write is checked both ways:
 * refused (403) without a token, with a wrong one, cross-origin, with
 * --read-only and without a token file, and then changing nothing in the
 * broker; done with the token, and then seen in the broker. A bulk action
 * on dead letters with a stale count is refused (409) and touches nothing.
 * No answer, body or header, ever holds the Redis password, even while the
 * server is down.
 *
 * The page itself, in a browser, is tests/test-web-browser.py's. No
 * assertion depends on timing: tests wait for states with generous bounds.
 */
#include "config.h"

#include <check.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <sluice/sluice.h>

#include "tests/helpers/command.h"
#include "tests/helpers/redis-fixture.h"

#define SLUICE_BIN TEST_BUILDDIR "/cli/sluice"
#define DEMO_MODULE TEST_BUILDDIR "/examples/demo-module/.libs/demo.so"

/* A bound for broken code, not a timing assertion. */
#define PATIENCE_US (90 * G_USEC_PER_SEC)

#define TOKEN "0123456789abcdef-the-right-token"

static const gchar *const modes[] = {"fast", "reliable"};

/* ---- Processes ----------------------------------------------------------- */

/* The command under test (tests/helpers/command.c). */
typedef SluiceTestCommand Ctx;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Ctx, sluice_test_command_free)
typedef SluiceTestRun Run;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Run, sluice_test_run_free)
#define child_setup sluice_test_command_child_setup
#define cli(ctx, ...) sluice_test_command_run((ctx), __VA_ARGS__)
#define enqueue(ctx, ...) sluice_test_command_enqueue((ctx), __VA_ARGS__)

/* A test's world on @server (NULL: the suite's). */
static Ctx *
ctx_new(int mode_index, SluiceTestRedis *server)
{
  return sluice_test_command_new(modes[mode_index], server, "sluice-web");
}

#define assert_status(run, expected)                                           \
  ck_assert_msg((run)->status == (expected),                                   \
                "exit status %d, expected %d\nstdout: %s\nstderr: %s",         \
                (run)->status, (expected), (run)->out, (run)->err)

/* `sluice ARGS... --json`, parsed. */
static JsonNode *cli_json(Ctx *ctx, const gchar *first,
                          ...) G_GNUC_NULL_TERMINATED;
static JsonNode *
cli_json(Ctx *ctx, const gchar *first, ...)
{
  const gchar *args[8] = {NULL};
  guint n = 0;
  va_list ap;
  g_autoptr(Run) r = NULL;
  g_autoptr(GError) error = NULL;
  JsonNode *node;

  va_start(ap, first);
  for (const gchar *a = first; a != NULL && n < 6;
       a = va_arg(ap, const gchar *))
    args[n++] = a;
  va_end(ap);
  args[n] = "--json";
  r = cli(ctx, args[0], args[1], args[2], args[3], args[4], args[5], args[6],
          NULL);
  assert_status(r, 0);
  node = json_from_string(r->out, &error);
  ck_assert_msg(node != NULL, "%s: %s", r->out, error->message);
  return node;
}

/* A `sluice web` or `sluice worker`, its log in a file. */
typedef struct {
  GSubprocess *proc;
  gchar *log;
  gchar *http; /* "http://127.0.0.1:PORT", from the log of `sluice web` */
} Proc;

static gchar *
proc_log(const Proc *p)
{
  gchar *text = NULL;

  if (!g_file_get_contents(p->log, &text, NULL, NULL))
    return g_strdup("");
  return text;
}

static void
proc_free(Proc *p)
{
  if (p->proc != NULL && g_subprocess_get_identifier(p->proc) != NULL)
    g_subprocess_force_exit(p->proc);
  g_clear_object(&p->proc);
  g_free(p->log);
  g_free(p->http);
  g_free(p);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Proc, proc_free)

/* Starts `sluice ARGV...` and waits until its log holds @ready. */
static Proc *
proc_start(Ctx *ctx, const gchar *ready, const gchar *const *argv)
{
  g_autoptr(GSubprocessLauncher) launcher =
      g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_autoptr(GPtrArray) args = g_ptr_array_new();
  g_autoptr(GError) error = NULL;
  Proc *p = g_new0(Proc, 1);
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  p->log = g_strdup_printf("%s/proc-%u.log", ctx->dir, ctx->n_logs++);
  g_ptr_array_add(args, (gpointer)SLUICE_BIN);
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add(args, (gpointer)argv[i]);
  g_ptr_array_add(args, NULL);
  g_subprocess_launcher_set_environ(launcher, ctx->env);
  g_subprocess_launcher_set_stderr_file_path(launcher, p->log);
  g_subprocess_launcher_set_child_setup(launcher, child_setup, NULL, NULL);
  p->proc = g_subprocess_launcher_spawnv(
      launcher, (const gchar *const *)args->pdata, &error);
  ck_assert_msg(p->proc != NULL, "spawn: %s", error->message);
  for (;;) {
    g_autofree gchar *log = proc_log(p);
    const gchar *at = strstr(log, ready);

    if (at != NULL) {
      const gchar *http = strstr(at, "http://");
      if (http != NULL)
        p->http = g_strndup(http, (gsize)(strchr(http + 7, '/') - http));
      return p;
    }
    ck_assert_msg(g_subprocess_get_identifier(p->proc) != NULL,
                  "%s exited before it was ready:\n%s", argv[0], log);
    ck_assert_msg(g_get_monotonic_time() < deadline, "%s never got ready:\n%s",
                  argv[0], log);
    g_usleep(20 * 1000);
  }
}

/* `sluice web` on a free port with the options given (NULL-terminated). */
static Proc *web_start(Ctx *ctx, ...) G_GNUC_NULL_TERMINATED;
static Proc *
web_start(Ctx *ctx, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  va_list ap;

  g_ptr_array_add(argv, (gpointer) "web");
  g_ptr_array_add(argv, (gpointer) "--listen");
  g_ptr_array_add(argv, (gpointer) "127.0.0.1:0");
  va_start(ap, ctx);
  for (const gchar *a = va_arg(ap, const gchar *); a != NULL;
       a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  va_end(ap);
  g_ptr_array_add(argv, NULL);
  return proc_start(ctx, "serving on ", (const gchar *const *)argv->pdata);
}

static Proc *
worker_start(Ctx *ctx)
{
  const gchar *argv[] = {"worker",  "--module", DEMO_MODULE,
                         "--queue", "work",     NULL};

  return proc_start(ctx, " ready: ", argv);
}

/* A token file holding @token. */
static gchar *
token_file(Ctx *ctx, const gchar *token)
{
  gchar *path = g_build_filename(ctx->dir, "token", NULL);
  g_autofree gchar *text = g_strconcat(token, "\n", NULL);

  ck_assert(g_file_set_contents(path, text, -1, NULL));
  g_chmod(path, 0600);
  return path;
}

/* SIGTERM, then waits for a graceful exit (status 0). */
static void
proc_stop(Proc *p)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *log = NULL;

  g_subprocess_send_signal(p->proc, SIGTERM);
  ck_assert(g_subprocess_wait(p->proc, NULL, &error));
  log = proc_log(p);
  ck_assert_msg(g_subprocess_get_if_exited(p->proc) &&
                    g_subprocess_get_exit_status(p->proc) == 0,
                "did not exit 0 after SIGTERM:\n%s", log);
}

/* ---- HTTP ---------------------------------------------------------------- */

typedef struct {
  guint status;
  gchar *body;
  gchar *headers; /* every response header, "Name: value\n" each */
  gchar *content_type;
  JsonNode *json; /* the body parsed, when it is JSON */
} Reply;

static void
reply_free(Reply *r)
{
  g_free(r->body);
  g_free(r->headers);
  g_free(r->content_type);
  if (r->json != NULL)
    json_node_unref(r->json);
  g_free(r);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Reply, reply_free)

static void
add_header(const char *name, const char *value, gpointer data)
{
  g_string_append_printf(data, "%s: %s\n", name, value);
}

/* @method @path on @p with @form (application/x-www-form-urlencoded,
 * nullable) and extra request headers (name, value, ..., NULL). */
static Reply *request(const Proc *p, const gchar *method, const gchar *path,
                      const gchar *form, ...) G_GNUC_NULL_TERMINATED;
static Reply *
request(const Proc *p, const gchar *method, const gchar *path,
        const gchar *form, ...)
{
  g_autoptr(SoupSession) session = soup_session_new();
  g_autofree gchar *url = g_strconcat(p->http, path, NULL);
  g_autoptr(SoupMessage) msg = soup_message_new(method, url);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) body = NULL;
  GString *headers = g_string_new(NULL);
  Reply *r = g_new0(Reply, 1);
  const gchar *type;
  gsize size;
  const gchar *data;
  va_list ap;

  ck_assert_msg(msg != NULL, "bad URL %s", url);
  if (form != NULL) {
    g_autoptr(GBytes) bytes = g_bytes_new(form, strlen(form));
    soup_message_set_request_body_from_bytes(
        msg, "application/x-www-form-urlencoded", bytes);
  }
  va_start(ap, form);
  for (const gchar *name = va_arg(ap, const gchar *); name != NULL;
       name = va_arg(ap, const gchar *))
    soup_message_headers_replace(soup_message_get_request_headers(msg), name,
                                 va_arg(ap, const gchar *));
  va_end(ap);
  body = soup_session_send_and_read(session, msg, NULL, &error);
  ck_assert_msg(body != NULL, "%s %s: %s", method, url,
                error != NULL ? error->message : "");
  r->status = soup_message_get_status(msg);
  soup_message_headers_foreach(soup_message_get_response_headers(msg),
                               add_header, headers);
  r->headers = g_string_free(headers, FALSE);
  type = soup_message_headers_get_content_type(
      soup_message_get_response_headers(msg), NULL);
  r->content_type = g_strdup(type);
  data = g_bytes_get_data(body, &size);
  r->body = g_strndup(data != NULL ? data : "", size);
  if (g_strcmp0(type, "application/json") == 0) {
    r->json = json_from_string(r->body, &error);
    ck_assert_msg(r->json != NULL, "%s %s: not JSON: %s", method, path,
                  r->body);
  }
  return r;
}

static Reply *
get(const Proc *p, const gchar *path)
{
  return request(p, "GET", path, NULL, NULL);
}

/* A POST with the right token. */
static Reply *
post(const Proc *p, const gchar *path, const gchar *form)
{
  return request(p, "POST", path, form, "X-Sluice-Token", TOKEN, NULL);
}

#define assert_reply(r, want)                                                  \
  ck_assert_msg((r)->status == (want), "HTTP %u, expected %u: %s",             \
                (r)->status, (guint)(want), (r)->body)

static JsonObject *
obj(Reply *r)
{
  ck_assert_msg(r->json != NULL && JSON_NODE_HOLDS_OBJECT(r->json),
                "not a JSON object: %s", r->body);
  return json_node_get_object(r->json);
}

/* The set of @key of the objects in @array. */
static GHashTable *
ids_of(JsonArray *array, const gchar *key)
{
  GHashTable *set =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; i < json_array_get_length(array); i++)
    g_hash_table_add(set, g_strdup(json_object_get_string_member(
                              json_array_get_object_element(array, i), key)));
  return set;
}

/* Takes both sets. */
static void
assert_same_ids(GHashTable *a, GHashTable *b)
{
  g_autoptr(GHashTable) own_a = a;
  g_autoptr(GHashTable) own_b = b;
  GHashTableIter it;
  gpointer key;

  ck_assert_uint_eq(g_hash_table_size(a), g_hash_table_size(b));
  g_hash_table_iter_init(&it, a);
  while (g_hash_table_iter_next(&it, &key, NULL))
    ck_assert_msg(g_hash_table_contains(b, key), "%s missing", (gchar *)key);
}

static gboolean
queue_paused(Ctx *ctx, const gchar *name)
{
  g_autoptr(JsonNode) stats = cli_json(ctx, "stats", NULL);
  JsonArray *queues =
      json_object_get_array_member(json_node_get_object(stats), "queues");

  for (guint i = 0; i < json_array_get_length(queues); i++) {
    JsonObject *q = json_array_get_object_element(queues, i);
    if (g_strcmp0(json_object_get_string_member(q, "name"), name) == 0)
      return json_object_get_boolean_member(q, "paused");
  }
  return FALSE;
}

static gint64
dead_count(Ctx *ctx)
{
  g_autoptr(JsonNode) dlq = cli_json(ctx, "dlq", "list", NULL);

  return json_array_get_length(
      json_object_get_array_member(json_node_get_object(dlq), "entries"));
}

static void
wait_state(Ctx *ctx, const gchar *id, const gchar *state)
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  for (;;) {
    g_autoptr(JsonNode) r = cli_json(ctx, "inspect", id, NULL);
    const gchar *now =
        json_object_get_string_member(json_node_get_object(r), "state");
    if (g_strcmp0(now, state) == 0)
      return;
    ck_assert_msg(g_get_monotonic_time() < deadline, "%s stayed %s, not %s", id,
                  now, state);
    g_usleep(50 * 1000);
  }
}

/* ---- Reads --------------------------------------------------------------- */

/* @o without the members named in @volatile_ (NULL-terminated): a deep
 * copy, to compare two reads of a record that moves between them. */
static JsonNode *
without_members(JsonObject *o, const gchar *const *volatile_)
{
  JsonNode *node = json_node_new(JSON_NODE_OBJECT);
  JsonObject *copy = json_object_new();
  g_autoptr(GList) names = json_object_get_members(o);

  for (GList *n = names; n != NULL; n = n->next)
    if (!g_strv_contains(volatile_, n->data))
      json_object_set_member(
          copy, n->data, json_node_copy(json_object_get_member(o, n->data)));
  json_node_take_object(node, copy);
  return node;
}

/* The names of @o's members, sorted and joined, for a message that says
 * which differ. */
static gchar *
member_names(JsonObject *o)
{
  g_autoptr(GList) names = json_object_get_members(o);
  g_autoptr(GString) out = g_string_new(NULL);

  names = g_list_sort(names, (GCompareFunc)strcmp);
  for (GList *n = names; n != NULL; n = n->next)
    g_string_append_printf(out, "%s%s", out->len > 0 ? " " : "",
                           (const gchar *)n->data);
  return g_string_free(g_steal_pointer(&out), FALSE);
}

/* `sluice stats --json` and /api/overview are one writer's (records.c):
 * the overview holds every field of the stats, with the same value, and
 * only the dashboard's own besides; each worker is the same object in
 * both, but for what its heartbeat moves between the two reads. A field
 * added to one and not the other fails here. */
static void
assert_overview_is_stats(JsonObject *overview, JsonObject *stats)
{
  static const gchar *const dashboard_only[] = {
      "broker", "writes", "now", "started_at", "dead_letter_reasons", NULL};
  static const gchar *const heartbeat[] = {"last_seen", "health", NULL};
  g_autoptr(GList) names = json_object_get_members(overview);
  g_autofree gchar *o_names = member_names(overview);
  g_autofree gchar *s_names = member_names(stats);
  JsonArray *ow, *sw;

  for (GList *n = names; n != NULL; n = n->next)
    ck_assert_msg(g_strv_contains(dashboard_only, n->data) ||
                      json_object_has_member(stats, n->data),
                  "/api/overview has %s, sluice stats --json has not (%s / "
                  "%s)",
                  (const gchar *)n->data, o_names, s_names);
  {
    g_autoptr(GList) stats_names = json_object_get_members(stats);
    for (GList *n = stats_names; n != NULL; n = n->next) {
      ck_assert_msg(json_object_has_member(overview, n->data),
                    "sluice stats --json has %s, /api/overview has not (%s / "
                    "%s)",
                    (const gchar *)n->data, s_names, o_names);
      if (strcmp(n->data, "workers") != 0)
        ck_assert_msg(
            json_node_equal(json_object_get_member(overview, n->data),
                            json_object_get_member(stats, n->data)),
            "%s differs between /api/overview and sluice stats --json",
            (const gchar *)n->data);
    }
  }
  ow = json_object_get_array_member(overview, "workers");
  sw = json_object_get_array_member(stats, "workers");
  ck_assert_uint_eq(json_array_get_length(ow), json_array_get_length(sw));
  for (guint i = 0; i < json_array_get_length(ow); i++) {
    JsonObject *a = json_array_get_object_element(ow, i);
    JsonObject *b = json_array_get_object_element(sw, i);
    g_autofree gchar *a_names = member_names(a);
    g_autofree gchar *b_names = member_names(b);
    g_autoptr(JsonNode) a_still = without_members(a, heartbeat);
    g_autoptr(JsonNode) b_still = without_members(b, heartbeat);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree gchar *a_text = NULL;
    g_autofree gchar *b_text = NULL;

    ck_assert_msg(strcmp(a_names, b_names) == 0,
                  "a worker's fields: /api/overview has %s, sluice stats "
                  "--json %s",
                  a_names, b_names);
    json_generator_set_root(gen, a_still);
    a_text = json_generator_to_data(gen, NULL);
    json_generator_set_root(gen, b_still);
    b_text = json_generator_to_data(gen, NULL);
    ck_assert_msg(json_node_equal(a_still, b_still),
                  "a worker differs:\n/api/overview: %s\nsluice stats "
                  "--json: %s",
                  a_text, b_text);
  }
}

START_TEST(test_reads_match_the_broker)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autoptr(Proc) worker = worker_start(ctx);
  g_autofree gchar *queued =
      enqueue(ctx, "demo.noop", "{\"n\": 1}", "--queue", "idle", NULL);
  g_autofree gchar *dead =
      enqueue(ctx, "demo.fatal", "{}", "--queue", "work", NULL);
  g_autoptr(Proc) web = NULL;
  g_autoptr(Reply) overview = NULL;
  g_autoptr(Reply) dead_page = NULL;
  g_autoptr(Reply) task = NULL;
  g_autoptr(Reply) missing = NULL;
  g_autoptr(Reply) no_queue = NULL;
  g_autoptr(Reply) queued_page = NULL;
  g_autoptr(JsonNode) stats = NULL;
  g_autoptr(JsonNode) dlq = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autofree gchar *cursor = NULL;
  JsonObject *o, *s, *t;
  guint pages = 0;

  for (guint i = 0; i < 5; i++)
    g_free(enqueue(ctx, "demo.noop", "{}", "--queue", "work", "--delay", "1h",
                   NULL));
  wait_state(ctx, dead, "dead_lettered");
  /* Until the worker has announced it, so that nothing of it moves while
   * the overview and `sluice stats` are read below. */
  for (gint64 deadline = g_get_monotonic_time() + PATIENCE_US;;) {
    g_autoptr(JsonNode) now = cli_json(ctx, "stats", NULL);
    JsonArray *workers =
        json_object_get_array_member(json_node_get_object(now), "workers");

    if (json_array_get_length(workers) == 1 &&
        json_object_get_int_member(json_array_get_object_element(workers, 0),
                                   "dead_lettered") == 1)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "the worker never announced its dead letter");
    g_usleep(100 * 1000);
  }
  web = web_start(ctx, NULL);

  /* The overview is the broker's stats. */
  overview = get(web, "/api/overview");
  assert_reply(overview, 200);
  ck_assert_str_eq(overview->content_type, "application/json");
  stats = cli_json(ctx, "stats", NULL);
  o = obj(overview);
  s = json_node_get_object(stats);
  ck_assert_str_eq(json_object_get_string_member(o, "namespace"), ctx->ns);
  ck_assert_str_eq(json_object_get_string_member(o, "mode"), ctx->mode);
  ck_assert_str_eq(json_object_get_string_member(o, "writes"), "no-token");
  ck_assert_int_eq(json_object_get_int_member(o, "scheduled"), 5);
  ck_assert_int_eq(json_object_get_int_member(o, "scheduled"),
                   json_object_get_int_member(s, "scheduled"));
  ck_assert_int_eq(json_object_get_int_member(o, "dead_letters"), 1);
  ck_assert_int_eq(json_object_get_int_member(o, "dead_letters"),
                   json_object_get_int_member(s, "dead_letters"));
  ck_assert_int_eq(json_object_get_int_member(json_object_get_object_member(
                                                  o, "dead_letters_by_reason"),
                                              "non_retryable"),
                   1);
  assert_same_ids(ids_of(json_object_get_array_member(o, "queues"), "name"),
                  ids_of(json_object_get_array_member(s, "queues"), "name"));
  {
    JsonArray *workers = json_object_get_array_member(o, "workers");
    ck_assert_uint_eq(json_array_get_length(workers), 1);
    ck_assert_str_eq(json_object_get_string_member(
                         json_array_get_object_element(workers, 0), "health"),
                     "healthy");
  }
  assert_overview_is_stats(o, s);

  /* The schedule, a page of two at a time: every task once. */
  do {
    g_autofree gchar *path =
        g_strdup_printf("/api/tasks?state=scheduled&limit=2%s%s",
                        cursor ? "&cursor=" : "", cursor ? cursor : "");
    g_autoptr(Reply) page = get(web, path);
    JsonArray *tasks;

    assert_reply(page, 200);
    tasks = json_object_get_array_member(obj(page), "tasks");
    ck_assert_uint_le(json_array_get_length(tasks), 2);
    for (guint i = 0; i < json_array_get_length(tasks); i++) {
      const gchar *id = json_object_get_string_member(
          json_array_get_object_element(tasks, i), "id");
      ck_assert_msg(g_hash_table_add(seen, g_strdup(id)), "%s twice", id);
    }
    g_free(cursor);
    cursor =
        json_object_get_null_member(obj(page), "next_cursor")
            ? NULL
            : g_strdup(json_object_get_string_member(obj(page), "next_cursor"));
    ck_assert_uint_lt(++pages, 10);
  } while (cursor != NULL);
  {
    g_autoptr(JsonNode) ls = cli_json(ctx, "ls", "--state", "scheduled", NULL);
    assert_same_ids(
        g_hash_table_ref(seen),
        ids_of(json_object_get_array_member(json_node_get_object(ls), "tasks"),
               "id"));
  }

  /* A queue's tasks, with their arguments. */
  queued_page = get(web, "/api/tasks?state=queued&queue=idle");
  assert_reply(queued_page, 200);
  t = json_array_get_object_element(
      json_object_get_array_member(obj(queued_page), "tasks"), 0);
  ck_assert_str_eq(json_object_get_string_member(t, "id"), queued);
  ck_assert_int_eq(
      json_object_get_int_member(json_object_get_object_member(t, "args"), "n"),
      1);
  no_queue = get(web, "/api/tasks?state=queued");
  assert_reply(no_queue, 400);
  ck_assert(strstr(no_queue->body, "queue=") != NULL);

  /* The dead letters, as `sluice dlq list` has them. */
  dead_page = get(web, "/api/dead?reason=non_retryable");
  assert_reply(dead_page, 200);
  dlq = cli_json(ctx, "dlq", "list", NULL);
  assert_same_ids(
      ids_of(json_object_get_array_member(obj(dead_page), "entries"),
             "entry_id"),
      ids_of(json_object_get_array_member(json_node_get_object(dlq), "entries"),
             "entry_id"));

  /* A dead task's page: its record, its dead letter and its message. */
  {
    g_autofree gchar *path = g_strdup_printf("/api/task?id=%s", dead);
    task = get(web, path);
  }
  assert_reply(task, 200);
  t = obj(task);
  ck_assert_str_eq(json_object_get_string_member(
                       json_object_get_object_member(t, "record"), "state"),
                   "dead_lettered");
  ck_assert_str_eq(
      json_object_get_string_member(
          json_object_get_object_member(t, "dead_letter"), "reason"),
      "non_retryable");
  ck_assert_str_eq(json_object_get_string_member(
                       json_object_get_object_member(t, "envelope"), "task"),
                   "demo.fatal");
  missing = get(web, "/api/task?id=no-such-task");
  assert_reply(missing, 404);

  /* Nothing changed on the way. */
  ck_assert_int_eq(dead_count(ctx), 1);
  proc_stop(web);
  proc_stop(worker);
}
END_TEST

START_TEST(test_pages_are_embedded)
{
  g_autoptr(Ctx) ctx = ctx_new(0, NULL);
  g_autoptr(Proc) web = web_start(ctx, NULL);
  g_autoptr(Reply) index = get(web, "/");
  g_autoptr(Reply) script = get(web, "/app.js");
  g_autoptr(Reply) style = get(web, "/app.css");
  g_autoptr(Reply) missing = get(web, "/../../etc/passwd");
  g_autoptr(Reply) api_missing = get(web, "/api/nothing");
  g_autoptr(Reply) put = request(web, "PUT", "/api/overview", "", NULL);
  g_autoptr(Reply) rebound = request(web, "GET", "/api/overview", NULL, "Host",
                                     "attacker.example:9466", NULL);
  g_autoptr(Reply) rebound_page =
      request(web, "GET", "/", NULL, "Host", "attacker.example", NULL);
  g_autoptr(Reply) by_name =
      request(web, "GET", "/api/overview", NULL, "Host", "localhost", NULL);

  assert_reply(index, 200);
  ck_assert_str_eq(index->content_type, "text/html");
  ck_assert(strstr(index->body, "<script src=\"/app.js\"") != NULL);
  ck_assert(strstr(index->headers, "Content-Security-Policy: default-src "
                                   "'none'; script-src 'self'") != NULL);
  ck_assert(strstr(index->headers, "X-Frame-Options: DENY") != NULL);
  assert_reply(script, 200);
  ck_assert_str_eq(script->content_type, "text/javascript");
  /* Data from messages reaches the page as text only. */
  ck_assert(strstr(script->body, "innerHTML") == NULL);
  assert_reply(style, 200);
  ck_assert_str_eq(style->content_type, "text/css");
  assert_reply(missing, 404);
  assert_reply(api_missing, 404);
  assert_reply(put, 405);
  /* Loopback answers loopback names only (DNS rebinding). */
  assert_reply(rebound, 403);
  ck_assert(strstr(rebound->body, "loopback") != NULL);
  assert_reply(rebound_page, 403);
  assert_reply(by_name, 200);
  proc_stop(web);
}
END_TEST

/* Every dead-letter reason of the library's list is in the overview (the
 * page's filter reads it there, and lists none of its own), and the dead
 * letters of each can be listed and counted: the by-reason link of
 * snoozed_too_often once led to an error page. */
START_TEST(test_every_dead_letter_reason_is_served)
{
  g_autoptr(Ctx) ctx = ctx_new(0, NULL);
  g_autoptr(Proc) web = web_start(ctx, NULL);
  g_autoptr(Reply) overview = get(web, "/api/overview");
  g_autoptr(Reply) script = get(web, "/app.js");
  g_autoptr(Reply) unknown = get(web, "/api/dead?reason=nope");
  const gchar *const *reasons = sluice_dead_letter_reasons();
  JsonArray *listed;

  assert_reply(overview, 200);
  listed = json_object_get_array_member(obj(overview), "dead_letter_reasons");
  ck_assert_uint_eq(json_array_get_length(listed),
                    g_strv_length((gchar **)reasons));
  for (guint i = 0; reasons[i] != NULL; i++) {
    g_autofree gchar *dead = g_strdup_printf("/api/dead?reason=%s", reasons[i]);
    g_autofree gchar *count =
        g_strdup_printf("/api/dead/count?reason=%s", reasons[i]);
    g_autofree gchar *quoted = g_strdup_printf("'%s'", reasons[i]);
    g_autoptr(Reply) page = get(web, dead);
    g_autoptr(Reply) n = get(web, count);

    ck_assert_str_eq(json_array_get_string_element(listed, i), reasons[i]);
    assert_reply(page, 200);
    assert_reply(n, 200);
    ck_assert_msg(strstr(script->body, quoted) == NULL,
                  "app.js lists the reason %s itself", reasons[i]);
  }
  assert_reply(unknown, 400);
  proc_stop(web);
}
END_TEST

/* ---- Writes -------------------------------------------------------------- */

START_TEST(test_writes_need_the_token)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autofree gchar *tokens = token_file(ctx, TOKEN);
  g_autoptr(Proc) web = web_start(ctx, "--token-file", tokens, NULL);
  g_autofree gchar *id =
      enqueue(ctx, "demo.noop", "{}", "--queue", "work", NULL);
  g_autofree gchar *own_origin = g_strdup(web->http);
  struct {
    const gchar *what;
    const gchar *const headers[6];
    const gchar *needle;
  } refused[] = {
      {"no token", {NULL}, "X-Sluice-Token"},
      {"an empty token", {"X-Sluice-Token", "", NULL}, "X-Sluice-Token"},
      {"a wrong token",
       {"X-Sluice-Token", "0123456789abcdef-a-wrong-token", NULL},
       "wrong token"},
      {"a prefix of the token",
       {"X-Sluice-Token", "0123456789abcdef", NULL},
       "wrong token"},
      {"another origin",
       {"X-Sluice-Token", TOKEN, "Origin", "http://attacker.example", NULL},
       "cross-origin"},
      {"a cross-site fetch",
       {"X-Sluice-Token", TOKEN, "Sec-Fetch-Site", "cross-site", NULL},
       "cross-origin"},
      {"a cookie only",
       {"Cookie", "X-Sluice-Token=" TOKEN, NULL},
       "X-Sluice-Token"},
  };
  g_autoptr(Reply) no_body = NULL;
  g_autoptr(Reply) get_pause = NULL;
  g_autoptr(Reply) same_origin = NULL;
  g_autoptr(Reply) resume = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS(refused); i++) {
    const gchar *const *h = refused[i].headers;
    g_autoptr(Reply) r = request(web, "POST", "/api/queues/pause", "queue=work",
                                 h[0], h[1], h[2], h[3], NULL);
    ck_assert_msg(r->status == 403, "%s: HTTP %u %s", refused[i].what,
                  r->status, r->body);
    ck_assert_msg(strstr(r->body, refused[i].needle) != NULL, "%s: %s",
                  refused[i].what, r->body);
    ck_assert_msg(!queue_paused(ctx, "work"), "%s paused the queue",
                  refused[i].what);
  }
  /* A POST without a body is a request like another. */
  no_body = request(web, "POST", "/api/queues/pause", NULL, "X-Sluice-Token",
                    TOKEN, NULL);
  assert_reply(no_body, 400);
  ck_assert(strstr(no_body->body, "queue=") != NULL);
  /* A GET never acts, whatever its path. */
  get_pause = get(web, "/api/queues/pause?queue=work");
  assert_reply(get_pause, 404);
  ck_assert(!queue_paused(ctx, "work"));

  /* The dashboard's own page: same origin, the token. */
  same_origin = request(web, "POST", "/api/queues/pause", "queue=work",
                        "X-Sluice-Token", TOKEN, "Origin", own_origin,
                        "Sec-Fetch-Site", "same-origin", NULL);
  assert_reply(same_origin, 200);
  ck_assert(queue_paused(ctx, "work"));
  resume = post(web, "/api/queues/resume", "queue=work");
  assert_reply(resume, 200);
  ck_assert(!queue_paused(ctx, "work"));

  /* Purging takes the queue's name again. */
  {
    g_autoptr(Reply) unconfirmed = post(web, "/api/queues/purge", "queue=work");
    g_autoptr(Reply) purged =
        post(web, "/api/queues/purge", "queue=work&confirm=work");
    g_autoptr(JsonNode) ls = NULL;

    assert_reply(unconfirmed, 400);
    assert_reply(purged, 200);
    ck_assert_int_eq(json_object_get_int_member(obj(purged), "removed"), 1);
    ls = cli_json(ctx, "ls", "work", NULL);
    ck_assert_uint_eq(json_array_get_length(json_object_get_array_member(
                          json_node_get_object(ls), "tasks")),
                      0);
  }
  proc_stop(web);
}
END_TEST

/* A task's page carries its last progress report. */
START_TEST(test_task_shows_its_progress)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autoptr(Proc) worker = worker_start(ctx);
  g_autofree gchar *id =
      enqueue(ctx, "demo.progress", "{\"steps\": 2, \"ms\": 0}", "--queue",
              "work", NULL);
  g_autofree gchar *plain =
      enqueue(ctx, "demo.noop", "{}", "--queue", "work", NULL);
  g_autofree gchar *path = g_strdup_printf("/api/task?id=%s", id);
  g_autofree gchar *plain_path = g_strdup_printf("/api/task?id=%s", plain);
  g_autoptr(Proc) web = NULL;
  g_autoptr(Reply) task = NULL;
  g_autoptr(Reply) none = NULL;
  JsonObject *progress;

  wait_state(ctx, id, "succeeded");
  wait_state(ctx, plain, "succeeded");
  web = web_start(ctx, NULL);
  task = get(web, path);
  assert_reply(task, 200);
  progress = json_object_get_object_member(obj(task), "progress");
  ck_assert(progress != NULL);
  ck_assert(json_object_get_double_member(progress, "fraction") == 1.0);
  ck_assert_str_eq(json_object_get_string_member(progress, "message"),
                   "step 2 of 2");
  none = get(web, plain_path);
  assert_reply(none, 200);
  ck_assert(json_object_get_null_member(obj(none), "progress"));
}
END_TEST

/* A worker that writes its tasks' lifecycle events. */
static Proc *
events_worker_start(Ctx *ctx)
{
  const gchar *argv[] = {"worker", "--module", DEMO_MODULE, "--queue",
                         "work",   "--events", NULL};

  return proc_start(ctx, " ready: ", argv);
}

/* GET /api/events?limit=@limit[&cursor=@cursor]. */
static Reply *
get_events(const Proc *web, const gchar *cursor, guint limit)
{
  g_autofree gchar *escaped =
      cursor != NULL ? g_uri_escape_string(cursor, NULL, FALSE) : NULL;
  g_autofree gchar *path =
      cursor != NULL
          ? g_strdup_printf("/api/events?limit=%u&cursor=%s", limit, escaped)
          : g_strdup_printf("/api/events?limit=%u", limit);

  return get(web, path);
}

/* The events endpoint lists a task's enqueued, started and succeeded
 * events in order, pages by its cursor without repeating one, and refuses
 * a cursor the broker never handed out. */
START_TEST(test_events_page_by_cursor)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autoptr(Proc) worker = events_worker_start(ctx);
  g_autoptr(SluiceBroker) broker = sluice_test_redis_broker(
      _i == 0 ? SLUICE_REDIS_FAST : SLUICE_REDIS_RELIABLE, ctx->url, ctx->ns,
      0);
  SluiceClientOptions co;
  g_autoptr(SluiceClient) client = NULL;
  SluiceEnqueueOptions eo;
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GPtrArray) kinds = g_ptr_array_new_with_free_func(g_free);
  g_autofree gchar *id = NULL;
  g_autofree gchar *cursor = NULL;
  g_autoptr(Proc) web = NULL;
  g_autoptr(Reply) bad = NULL;
  g_autoptr(Reply) unknown = NULL;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;
  guint pages = 0;

  sluice_client_options_init(&co);
  co.events = TRUE;
  client = sluice_client_new(broker, &co, &error);
  ck_assert_msg(client != NULL, "%s", error != NULL ? error->message : "");
  sluice_enqueue_options_init(&eo);
  eo.queue = "work";
  id = sluice_client_enqueue(client, "demo.noop", NULL, &eo, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  wait_state(ctx, id, "succeeded");
  web = web_start(ctx, NULL);

  /* One event a page, so that paging is what finds them all. The worker
   * writes "succeeded" with its settlement, which may land just after the
   * record says so: read until it is there. */
  while (kinds->len == 0 ||
         g_strcmp0(kinds->pdata[kinds->len - 1], "succeeded") != 0) {
    g_autoptr(Reply) page = get_events(web, cursor, 1);
    JsonArray *events;
    const gchar *next;

    assert_reply(page, 200);
    events = json_object_get_array_member(obj(page), "events");
    next = json_object_get_string_member(obj(page), "cursor");
    ck_assert(events != NULL && next != NULL);
    ck_assert_uint_le(json_array_get_length(events), 1);
    for (guint i = 0; i < json_array_get_length(events); i++) {
      JsonObject *e = json_array_get_object_element(events, i);
      const gchar *c = json_object_get_string_member(e, "cursor");

      ck_assert_msg(g_hash_table_add(seen, g_strdup(c)), "event %s came twice",
                    c);
      ck_assert_str_eq(c, next);
      if (g_strcmp0(json_object_get_string_member(e, "id"), id) != 0)
        continue;
      ck_assert_str_eq(json_object_get_string_member(e, "queue"), "work");
      ck_assert_str_eq(json_object_get_string_member(e, "task"), "demo.noop");
      g_ptr_array_add(kinds,
                      g_strdup(json_object_get_string_member(e, "kind")));
    }
    if (json_array_get_length(events) == 0) {
      ck_assert_msg(g_get_monotonic_time() < deadline,
                    "no succeeded event after %u events", kinds->len);
      g_usleep(50 * 1000);
    }
    g_free(cursor);
    cursor = g_strdup(next);
    pages++;
  }
  ck_assert_uint_eq(kinds->len, 3);
  ck_assert_str_eq(kinds->pdata[0], "enqueued");
  ck_assert_str_eq(kinds->pdata[1], "started");
  ck_assert_uint_ge(pages, 3);

  /* Past the last one, a page is empty and keeps the cursor. */
  {
    g_autoptr(Reply) end = get_events(web, cursor, 50);
    assert_reply(end, 200);
    ck_assert_uint_eq(
        json_array_get_length(json_object_get_array_member(obj(end), "events")),
        0);
    ck_assert_str_eq(json_object_get_string_member(obj(end), "cursor"), cursor);
  }

  bad = get_events(web, "not a cursor", 10);
  assert_reply(bad, 400);
  ck_assert_msg(strstr(json_object_get_string_member(obj(bad), "error"),
                       "not an events cursor") != NULL,
                "%s", bad->body);
  {
    /* Well formed, but ahead of every event: never handed out. */
    g_autofree gchar *ahead = g_strdup_printf(
        "%" G_GINT64_FORMAT "-0", g_get_real_time() / 1000 + 3600 * 1000);
    unknown = get_events(web, ahead, 10);
    assert_reply(unknown, 400);
    ck_assert_msg(strstr(json_object_get_string_member(obj(unknown), "error"),
                         "is unknown") != NULL,
                  "%s", unknown->body);
  }
}
END_TEST

/* A workflow's page reads its tree with each task's state, as `sluice
 * workflow show` draws it; an unknown workflow is 404. */
START_TEST(test_workflow_tree)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autoptr(Proc) worker = worker_start(ctx);
  g_autoptr(SluiceBroker) broker = sluice_test_redis_broker(
      _i == 0 ? SLUICE_REDIS_FAST : SLUICE_REDIS_RELIABLE, ctx->url, ctx->ns,
      0);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  SluiceWorkflow *group = sluice_workflow_group();
  g_autoptr(SluiceWorkflow) chord = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL, *last = NULL, *path = NULL;
  g_autoptr(Proc) web = NULL;
  g_autoptr(Reply) tree = NULL;
  g_autoptr(Reply) none = NULL;
  JsonObject *root, *callback;
  JsonArray *children, *members;
  SluiceEnqueueOptions eo;

  /* On the worker's queue. */
  sluice_enqueue_options_init(&eo);
  eo.queue = "work";
  sluice_workflow_add(group, sluice_workflow_task("demo.noop", NULL, &eo));
  sluice_workflow_add(group, sluice_workflow_task("demo.noop", NULL, &eo));
  chord =
      sluice_workflow_chord(group, sluice_workflow_task("demo.echo", NULL, &eo),
                            SLUICE_CHORD_WAIT_ALL);
  id = sluice_client_enqueue_workflow(client, chord, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  last = g_strdup_printf("%s.2", id);
  /* The callback has no record until the join releases it: wait on its
   * result rather than its record. */
  {
    g_autoptr(Run) result = cli(ctx, "result", last, "--wait", "90s", NULL);
    ck_assert_msg(result->status == 0, "%s", result->err);
  }
  web = web_start(ctx, NULL);
  path = g_strdup_printf("/api/workflows/%s", id);
  tree = get(web, path);
  assert_reply(tree, 200);
  ck_assert_str_eq(json_object_get_string_member(obj(tree), "id"), id);
  ck_assert_int_eq(json_object_get_int_member(obj(tree), "failed"), 0);
  root = json_object_get_object_member(obj(tree), "tree");
  ck_assert_str_eq(json_object_get_string_member(root, "kind"), "chord");
  ck_assert_str_eq(json_object_get_string_member(root, "policy"),
                   "wait for all");
  children = json_object_get_array_member(root, "children");
  ck_assert_uint_eq(json_array_get_length(children), 2);
  members = json_object_get_array_member(
      json_array_get_object_element(children, 0), "children");
  ck_assert_uint_eq(json_array_get_length(members), 2);
  for (guint i = 0; i < 2; i++) {
    JsonObject *m = json_array_get_object_element(members, i);
    ck_assert_str_eq(json_object_get_string_member(m, "task"), "demo.noop");
    ck_assert_str_eq(json_object_get_string_member(m, "state"), "succeeded");
  }
  callback = json_array_get_object_element(children, 1);
  ck_assert_str_eq(json_object_get_string_member(callback, "task"),
                   "demo.echo");
  ck_assert_str_eq(json_object_get_string_member(callback, "id"), last);
  ck_assert_str_eq(json_object_get_string_member(callback, "state"),
                   "succeeded");
  none = get(web, "/api/workflows/no-such-workflow");
  assert_reply(none, 404);
}
END_TEST

/* The dashboard's Cancel of a queued task takes it out of its queue: the
 * listing no longer has it and its record says cancelled; an id that is
 * nowhere is 404. */
START_TEST(test_cancel_takes_a_queued_task_out)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autofree gchar *tokens = token_file(ctx, TOKEN);
  g_autoptr(Proc) web = web_start(ctx, "--token-file", tokens, NULL);
  g_autofree gchar *queued =
      enqueue(ctx, "demo.noop", "{}", "--queue", "held", NULL);
  g_autofree gchar *form = g_strdup_printf("id=%s", queued);
  g_autoptr(Reply) del = post(web, "/api/tasks/delete", form);
  g_autoptr(Reply) page = get(web, "/api/tasks?state=queued&queue=held");
  g_autoptr(Reply) nowhere = post(web, "/api/tasks/delete", "id=not-an-id");
  JsonArray *tasks;

  assert_reply(del, 200);
  ck_assert_str_eq(json_object_get_string_member(obj(del), "outcome"),
                   "removed");
  assert_reply(page, 200);
  tasks = json_object_get_array_member(obj(page), "tasks");
  ck_assert_uint_eq(json_array_get_length(tasks), 0);
  wait_state(ctx, queued, "cancelled");
  assert_reply(nowhere, 404);
  proc_stop(web);
}
END_TEST

START_TEST(test_task_and_dead_letter_actions)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autofree gchar *tokens = token_file(ctx, TOKEN);
  g_autoptr(Proc) worker = worker_start(ctx);
  g_autoptr(Proc) web = web_start(ctx, "--token-file", tokens, NULL);
  g_autofree gchar *later =
      enqueue(ctx, "demo.noop", "{}", "--queue", "work", "--delay", "1h", NULL);
  g_autofree gchar *gone =
      enqueue(ctx, "demo.noop", "{}", "--queue", "work", "--delay", "1h", NULL);
  g_autofree gchar *form = NULL;
  g_autoptr(Reply) run_now = NULL;
  g_autoptr(Reply) del = NULL;
  g_autoptr(Reply) count = NULL;
  g_autoptr(Reply) stale = NULL;
  g_autoptr(Reply) all = NULL;
  g_autoptr(JsonNode) dlq = NULL;
  const gchar *entry;
  gchar *dead[3];

  /* Run a scheduled task now: it runs. */
  form = g_strdup_printf("id=%s", later);
  run_now = post(web, "/api/tasks/run-now", form);
  assert_reply(run_now, 200);
  wait_state(ctx, later, "succeeded");
  /* Delete one off the schedule: cancelled for good. */
  g_free(form);
  form = g_strdup_printf("id=%s", gone);
  del = post(web, "/api/tasks/delete", form);
  assert_reply(del, 200);
  ck_assert_str_eq(json_object_get_string_member(obj(del), "outcome"),
                   "unscheduled");
  wait_state(ctx, gone, "cancelled");

  for (guint i = 0; i < G_N_ELEMENTS(dead); i++) {
    dead[i] = enqueue(ctx, "demo.fatal", "{}", "--queue", "work", NULL);
    wait_state(ctx, dead[i], "dead_lettered");
  }
  /* One dead letter deleted, by its entry. */
  dlq = cli_json(ctx, "dlq", "list", NULL);
  entry = json_object_get_string_member(
      json_array_get_object_element(
          json_object_get_array_member(json_node_get_object(dlq), "entries"),
          0),
      "entry_id");
  g_free(form);
  form = g_strdup_printf("entry=%s", entry);
  {
    g_autoptr(Reply) one = post(web, "/api/dead/delete", form);
    g_autoptr(Reply) again = post(web, "/api/dead/delete", form);
    assert_reply(one, 200);
    assert_reply(again, 404);
  }
  ck_assert_int_eq(dead_count(ctx), 2);

  /* Replay all of a reason: counted, then confirmed with that count. */
  count = get(web, "/api/dead/count?reason=non_retryable");
  assert_reply(count, 200);
  ck_assert_int_eq(json_object_get_int_member(obj(count), "count"), 2);
  stale = post(web, "/api/dead/replay-all", "reason=non_retryable&expect=5");
  assert_reply(stale, 409);
  ck_assert_int_eq(json_object_get_int_member(obj(stale), "count"), 2);
  ck_assert_int_eq(dead_count(ctx), 2);
  {
    g_autoptr(Reply) bad =
        post(web, "/api/dead/replay-all", "reason=nope&expect=2");
    assert_reply(bad, 400);
  }
  all = post(web, "/api/dead/replay-all", "reason=non_retryable&expect=2");
  assert_reply(all, 200);
  ck_assert_int_eq(json_object_get_int_member(obj(all), "done"), 2);
  /* Replayed, they fail for good again: buried anew, so the worker ran
   * them; then deleted in bulk. */
  {
    gint64 deadline = g_get_monotonic_time() + PATIENCE_US;
    while (dead_count(ctx) != 2) {
      ck_assert_msg(g_get_monotonic_time() < deadline, "not buried again");
      g_usleep(50 * 1000);
    }
  }
  {
    g_autoptr(Reply) gone_all =
        post(web, "/api/dead/delete-all", "task=demo.fatal&expect=2");
    assert_reply(gone_all, 200);
    ck_assert_int_eq(dead_count(ctx), 0);
  }
  for (guint i = 0; i < G_N_ELEMENTS(dead); i++)
    g_free(dead[i]);
  proc_stop(web);
  proc_stop(worker);
}
END_TEST

START_TEST(test_read_only_refuses_writes)
{
  g_autoptr(Ctx) ctx = ctx_new(0, NULL);
  g_autofree gchar *tokens = token_file(ctx, TOKEN);
  g_autoptr(Proc) read_only =
      web_start(ctx, "--token-file", tokens, "--read-only", NULL);
  g_autoptr(Proc) no_token = web_start(ctx, NULL);
  g_autoptr(Reply) a = post(read_only, "/api/queues/pause", "queue=work");
  g_autoptr(Reply) b = post(no_token, "/api/queues/pause", "queue=work");
  g_autoptr(Reply) overview = get(read_only, "/api/overview");
  g_autofree gchar *short_token = token_file(ctx, "short");
  g_autoptr(Run) refused = cli(ctx, "web", "--listen", "127.0.0.1:0",
                               "--token-file", short_token, NULL);

  assert_reply(a, 403);
  ck_assert(strstr(a->body, "read-only") != NULL);
  assert_reply(b, 403);
  ck_assert(strstr(b->body, "--token-file") != NULL);
  ck_assert(!queue_paused(ctx, "work"));
  assert_reply(overview, 200);
  ck_assert_str_eq(json_object_get_string_member(obj(overview), "writes"),
                   "read-only");
  /* A token anyone could guess is refused at start. */
  assert_status(refused, 2);
  ck_assert(strstr(refused->err, "at least 16 bytes") != NULL);
  proc_stop(read_only);
  proc_stop(no_token);
}
END_TEST

START_TEST(test_config_file_web_group)
{
  g_autoptr(Ctx) ctx = ctx_new(0, NULL);
  g_autofree gchar *tokens = token_file(ctx, TOKEN);
  g_autofree gchar *path = g_build_filename(ctx->dir, "sluice.conf", NULL);
  g_autofree gchar *bad = g_build_filename(ctx->dir, "bad.conf", NULL);
  g_autofree gchar *config = g_strdup_printf(
      "[web]\nlisten=127.0.0.1:0\ntoken-file=%s\nread-only=true\n"
      "sample-interval=1s\n",
      tokens);
  const gchar *argv[] = {"web", "--config", path, NULL};
  g_autoptr(Proc) web = NULL;
  g_autoptr(Reply) overview = NULL;
  g_autoptr(Reply) refused = NULL;
  g_autoptr(Run) unknown = NULL;

  ck_assert(g_file_set_contents(path, config, -1, NULL));
  web = proc_start(ctx, "serving on ", argv);
  overview = get(web, "/api/overview");
  assert_reply(overview, 200);
  ck_assert_str_eq(json_object_get_string_member(obj(overview), "writes"),
                   "read-only");
  refused = post(web, "/api/queues/pause", "queue=work");
  assert_reply(refused, 403);
  proc_stop(web);

  /* A misspelt key is named, not ignored. */
  ck_assert(g_file_set_contents(bad, "[web]\ntokenfile=x\n", -1, NULL));
  unknown = cli(ctx, "web", "--config", bad, NULL);
  assert_status(unknown, 2);
  ck_assert(strstr(unknown->err, "unknown key") != NULL);
  ck_assert(strstr(unknown->err, "token-file") != NULL);
}
END_TEST

/* ---- The Redis password -------------------------------------------------- */

static void
assert_no_password(const Reply *r, const gchar *password, const gchar *what)
{
  ck_assert_msg(strstr(r->body, password) == NULL, "%s: the password in %s",
                what, r->body);
  ck_assert_msg(strstr(r->headers, password) == NULL,
                "%s: the password in a header", what);
}

START_TEST(test_password_never_in_any_response)
{
  const gchar *password = "s3cret-Pa55word";
  SluiceTestRedisOptions options = {.requirepass = password};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(&options);
  g_autoptr(Ctx) ctx = ctx_new(_i, server);
  g_autofree gchar *tokens = token_file(ctx, TOKEN);
  g_autoptr(Proc) worker = NULL;
  g_autoptr(Proc) web = NULL;
  g_autofree gchar *dead = NULL;
  g_autofree gchar *task_path = NULL;
  g_autofree gchar *shown = NULL;
  const gchar *paths[] = {
      "/",
      "/app.js",
      "/api/overview",
      "/api/rates",
      "/api/tasks?state=scheduled",
      "/api/tasks?state=running",
      "/api/tasks?state=queued&queue=work",
      "/api/tasks?state=bogus",
      "/api/dead",
      "/api/dead/count",
      "/api/task?id=none",
      NULL,
      NULL,
  };

  /* The URL itself holds the password (redis://:PASSWORD@...). */
  ck_assert(strstr(ctx->url, password) != NULL);
  worker = worker_start(ctx);
  dead = enqueue(ctx, "demo.fatal", "{}", "--queue", "work", NULL);
  wait_state(ctx, dead, "dead_lettered");
  web = web_start(ctx, "--token-file", tokens, NULL);
  task_path = g_strdup_printf("/api/task?id=%s", dead);
  paths[G_N_ELEMENTS(paths) - 2] = task_path;
  for (guint i = 0; paths[i] != NULL; i++) {
    g_autoptr(Reply) r = get(web, paths[i]);
    assert_no_password(r, password, paths[i]);
  }
  {
    g_autoptr(Reply) o = get(web, "/api/overview");
    shown = g_strdup_printf("redis://127.0.0.1:%u/0",
                            sluice_test_redis_port(server));
    ck_assert_str_eq(json_object_get_string_member(obj(o), "broker"), shown);
  }
  {
    g_autoptr(Reply) refused =
        request(web, "POST", "/api/queues/pause", "queue=work", NULL);
    g_autoptr(Reply) done = post(web, "/api/queues/pause", "queue=work");
    assert_no_password(refused, password, "a refused write");
    assert_no_password(done, password, "a write");
  }
  /* While the server is down, the errors name it, not its password. */
  proc_stop(worker);
  sluice_test_redis_kill(server, SIGKILL);
  for (guint i = 0; paths[i] != NULL; i++) {
    g_autoptr(Reply) r = get(web, paths[i]);
    assert_no_password(r, password, paths[i]);
    if (g_str_has_prefix(paths[i], "/api/overview"))
      assert_reply(r, 503);
  }
  {
    g_autoptr(Reply) down = post(web, "/api/queues/resume", "queue=work");
    assert_no_password(down, password, "a write while down");
    assert_reply(down, 503);
  }
  proc_stop(web);
}
END_TEST

/* ---- The chart's history ------------------------------------------------- */

/* The processed and failed counts of every point of /api/rates. */
static void
rates_sum(const Proc *web, gint64 *processed, gint64 *failed)
{
  g_autoptr(Reply) r = get(web, "/api/rates");
  JsonArray *points;

  assert_reply(r, 200);
  points = json_object_get_array_member(obj(r), "points");
  *processed = *failed = 0;
  for (guint i = 0; i < json_array_get_length(points); i++) {
    JsonObject *p = json_array_get_object_element(points, i);
    *processed += json_object_get_int_member(p, "processed");
    *failed += json_object_get_int_member(p, "failed");
    ck_assert_int_gt(json_object_get_int_member(p, "span_ms"), 0);
  }
}

START_TEST(test_rates_count_what_workers_finish)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  /* What a worker did before the dashboard started is not history. */
  g_autoptr(Proc) before = worker_start(ctx);
  g_autofree gchar *early =
      enqueue(ctx, "demo.noop", "{}", "--queue", "work", NULL);
  g_autoptr(Proc) web = NULL;
  g_autoptr(Proc) after = NULL;
  gint64 processed = 0, failed = 0;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  wait_state(ctx, early, "succeeded");
  /* ...once it has announced it: the dashboard's first sample is the
   * baseline. */
  for (;;) {
    g_autoptr(JsonNode) stats = cli_json(ctx, "stats", NULL);
    JsonArray *workers =
        json_object_get_array_member(json_node_get_object(stats), "workers");
    if (json_array_get_length(workers) == 1 &&
        json_object_get_int_member(json_array_get_object_element(workers, 0),
                                   "succeeded") == 1)
      break;
    ck_assert_msg(g_get_monotonic_time() < deadline, "never announced");
    g_usleep(100 * 1000);
  }
  web = web_start(ctx, "--sample-interval", "100ms", NULL);
  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id =
        enqueue(ctx, "demo.noop", "{}", "--queue", "work", NULL);
    wait_state(ctx, id, "succeeded");
  }
  {
    g_autofree gchar *id =
        enqueue(ctx, "demo.fatal", "{}", "--queue", "work", NULL);
    wait_state(ctx, id, "dead_lettered");
  }
  /* Workers announce their counts every 2 s, and web samples them. */
  while (rates_sum(web, &processed, &failed), processed < 4) {
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "processed %" G_GINT64_FORMAT, processed);
    g_usleep(100 * 1000);
  }
  ck_assert_int_eq(processed, 4);
  ck_assert_int_eq(failed, 1);

  /* A worker that stops takes nothing back; one that starts after the
   * dashboard brings what it did. */
  proc_stop(before);
  after = worker_start(ctx);
  {
    g_autofree gchar *id =
        enqueue(ctx, "demo.noop", "{}", "--queue", "work", NULL);
    wait_state(ctx, id, "succeeded");
  }
  while (rates_sum(web, &processed, &failed), processed < 5) {
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "processed %" G_GINT64_FORMAT, processed);
    g_usleep(100 * 1000);
  }
  ck_assert_int_eq(processed, 5);
  ck_assert_int_eq(failed, 1);
  proc_stop(web);
  proc_stop(after);
}
END_TEST

/* ---- The suite ----------------------------------------------------------- */

static gboolean
reliable_mode_available(void)
{
  SluiceRedisOptions options;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(GError) error = NULL;

  sluice_redis_options_init(&options);
  options.mode = SLUICE_REDIS_RELIABLE;
  broker = sluice_redis_broker_new(&options, NULL, &error);
  return broker != NULL || !g_error_matches(error, SLUICE_BROKER_ERROR,
                                            SLUICE_BROKER_ERROR_UNSUPPORTED);
}

int
main(void)
{
  g_autofree gchar *redis = sluice_test_redis_require();
  Suite *s = suite_create("web");
  TCase *api = tcase_create("api");
  int n_modes = reliable_mode_available() ? 2 : 1;
  SRunner *runner;
  int failed;

  tcase_add_unchecked_fixture(api, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(api, 300);
  tcase_add_loop_test(api, test_reads_match_the_broker, 0, n_modes);
  tcase_add_test(api, test_pages_are_embedded);
  tcase_add_test(api, test_every_dead_letter_reason_is_served);
  tcase_add_loop_test(api, test_writes_need_the_token, 0, n_modes);
  tcase_add_loop_test(api, test_task_and_dead_letter_actions, 0, n_modes);
  tcase_add_loop_test(api, test_cancel_takes_a_queued_task_out, 0, n_modes);
  tcase_add_loop_test(api, test_task_shows_its_progress, 0, n_modes);
  tcase_add_loop_test(api, test_events_page_by_cursor, 0, n_modes);
  tcase_add_loop_test(api, test_workflow_tree, 0, n_modes);
  tcase_add_test(api, test_read_only_refuses_writes);
  tcase_add_test(api, test_config_file_web_group);
  tcase_add_loop_test(api, test_password_never_in_any_response, 0, n_modes);
  tcase_add_loop_test(api, test_rates_count_what_workers_finish, 0, n_modes);
  suite_add_tcase(s, api);

  runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}
