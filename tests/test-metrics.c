/* test-metrics.c - metrics: what the worker counts, the Prometheus text it
 * renders, `sluice worker --metrics-listen` (/metrics and /healthz) and
 * `sluice exporter`, scraped with a real HTTP client (libsoup's
 * SoupSession) while tasks run.
 *
 * Every exposition is read by a strict parser of the text format (below):
 * each line is a HELP or TYPE comment or a sample, names and labels are
 * valid, each family is typed before its samples and its samples are
 * together, counters only grow between two scrapes, and the buckets of
 * every histogram are cumulative with +Inf equal to _count. The parser is
 * tested on bad input first, so that it cannot pass everything.
 *
 * The "render" and "collect" cases need no server (fixed inputs, and the
 * memory broker with a fake clock); the "http" cases start `sluice worker`
 * and `sluice exporter` processes against a redis-server of the suite (or
 * of their own, for the outage tests), in both modes. No assertion depends
 * on timing: tests wait for states with generous bounds.
 */
#include "config.h"

#include <check.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "lib/sluice-private.h"
#include "tests/helpers/command.h"
#include "tests/helpers/redis-fixture.h"

#define SLUICE_BIN TEST_BUILDDIR "/cli/sluice"
#define DEMO_MODULE TEST_BUILDDIR "/examples/demo-module/.libs/demo.so"

/* A bound for broken code, not a timing assertion. */
#define PATIENCE_US (90 * G_USEC_PER_SEC)

static const gchar *const modes[] = {"fast", "reliable"};

/* ---- A strict reader of the text exposition format ----------------------- */

typedef struct {
  GHashTable *types;   /* family -> "counter" | "gauge" | "histogram" */
  GHashTable *samples; /* "name{l=\"v\",...}" (labels sorted) -> gdouble* */
  GPtrArray *keys;     /* sample keys, in order */
} Exposition;

static void
exposition_free(Exposition *e)
{
  g_hash_table_unref(e->types);
  g_hash_table_unref(e->samples);
  g_ptr_array_unref(e->keys);
  g_free(e);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Exposition, exposition_free)

static gboolean
is_name_start(gchar c, gboolean colon)
{
  return g_ascii_isalpha(c) || c == '_' || (colon && c == ':');
}

/* A metric name (colons allowed) or label name at @p; advances it. */
static gchar *
read_name(const gchar **p, gboolean colon)
{
  const gchar *start = *p;

  if (!is_name_start(**p, colon))
    return NULL;
  while (is_name_start(**p, colon) || g_ascii_isdigit(**p))
    (*p)++;
  return g_strndup(start, (gsize)(*p - start));
}

/* Whether @text is the shortest form of the number it reads as: what
 * Prometheus's clients write, and what Sluice writes (no 17-digit
 * 0.0029970000000000001, no trailing zeros). */
static gboolean
is_shortest(const gchar *text, gdouble value)
{
  gchar buf[G_ASCII_DTOSTR_BUF_SIZE];

  if (!isfinite(value))
    return TRUE;
  for (const gchar *const *format =
           (const gchar *const[]){"%.15g", "%.16g", "%.17g", NULL};
       *format != NULL; format++) {
    g_ascii_formatd(buf, sizeof buf, *format, value);
    if (g_ascii_strtod(buf, NULL) == value)
      break;
  }
  return strcmp(buf, text) == 0;
}

static gboolean
read_value(const gchar *text, gdouble *out)
{
  gchar *end = NULL;

  if (strcmp(text, "+Inf") == 0 || strcmp(text, "-Inf") == 0 ||
      strcmp(text, "NaN") == 0) {
    *out = strcmp(text, "NaN") == 0 ? NAN
           : text[0] == '+'         ? INFINITY
                                    : -INFINITY;
    return TRUE;
  }
  if (text[0] == '\0' || g_ascii_isspace(text[0]))
    return FALSE;
  *out = g_ascii_strtod(text, &end);
  return end != text && *end == '\0' && isfinite(*out);
}

static gint
compare_strings(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

/* The family a sample belongs to: its own name, or a histogram's. */
static const gchar *
family_of(Exposition *e, const gchar *name, gchar **owned)
{
  static const gchar *const suffixes[] = {"_bucket", "_sum", "_count"};

  if (g_hash_table_contains(e->types, name))
    return name;
  for (guint i = 0; i < G_N_ELEMENTS(suffixes); i++)
    if (g_str_has_suffix(name, suffixes[i])) {
      g_autofree gchar *base =
          g_strndup(name, strlen(name) - strlen(suffixes[i]));
      if (g_strcmp0(g_hash_table_lookup(e->types, base), "histogram") == 0) {
        *owned = g_steal_pointer(&base);
        return *owned;
      }
    }
  return NULL;
}

/* Reads @text, or returns NULL with a message saying which line is wrong
 * and why. */
static Exposition *
parse_exposition(const gchar *text, gchar **why)
{
  g_autoptr(Exposition) e = g_new0(Exposition, 1);
  g_auto(GStrv) lines = NULL;
  g_autoptr(GHashTable) helped =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) closed =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autofree gchar *current = NULL; /* the family whose samples are open */
  guint n;

#define FAIL(...)                                                              \
  do {                                                                         \
    g_autofree gchar *_what = g_strdup_printf(__VA_ARGS__);                    \
    *why = g_strdup_printf("line %u: %s: [%s]", i + 1, _what, line);           \
    return NULL;                                                               \
  } while (0)

  e->types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  e->samples = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  e->keys = g_ptr_array_new();
  if (!g_str_has_suffix(text, "\n")) {
    *why = g_strdup("the text does not end with a newline");
    return NULL;
  }
  lines = g_strsplit(text, "\n", -1);
  n = g_strv_length(lines) - 1; /* after the last newline: "" */
  for (guint i = 0; i < n; i++) {
    const gchar *line = lines[i];
    const gchar *p = line;
    g_autofree gchar *name = NULL;
    g_autofree gchar *owned = NULL;
    g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GString) key = NULL;
    const gchar *family;
    gdouble value;

    if (line[0] == '\0')
      FAIL("an empty line");
    if (line[0] == '#') {
      gboolean help = g_str_has_prefix(line, "# HELP ");
      if (!help && !g_str_has_prefix(line, "# TYPE "))
        FAIL("a comment that is neither HELP nor TYPE");
      p = line + 7;
      name = read_name(&p, TRUE);
      if (name == NULL || *p != ' ')
        FAIL("no valid metric name");
      p++;
      if (g_hash_table_contains(closed, name) || g_strcmp0(current, name) == 0)
        FAIL("%s after samples of its family", help ? "HELP" : "TYPE");
      if (help) {
        if (!g_hash_table_add(helped, g_strdup(name)))
          FAIL("a second HELP");
        if (*p == '\0')
          FAIL("an empty HELP");
        for (const gchar *c = p; *c != '\0'; c++) {
          if (*c != '\\')
            continue;
          if (c[1] != '\\' && c[1] != 'n')
            FAIL("a bad escape in HELP");
          c++; /* the escaped character */
        }
      } else {
        if (strcmp(p, "counter") != 0 && strcmp(p, "gauge") != 0 &&
            strcmp(p, "histogram") != 0)
          FAIL("type “%s”", p);
        if (g_hash_table_contains(e->types, name))
          FAIL("a second TYPE");
        if (strcmp(p, "counter") == 0 && !g_str_has_suffix(name, "_total"))
          FAIL("a counter whose name does not end in _total");
        g_hash_table_insert(e->types, g_strdup(name), g_strdup(p));
      }
      continue;
    }

    name = read_name(&p, TRUE);
    if (name == NULL)
      FAIL("no valid metric name");
    if (*p == '{') {
      p++;
      while (*p != '}') {
        g_autofree gchar *label = read_name(&p, FALSE);
        g_autoptr(GString) v = g_string_new(NULL);
        if (label == NULL || *p != '=' || p[1] != '"')
          FAIL("a bad label");
        p += 2;
        while (*p != '"') {
          if (*p == '\0')
            FAIL("an unterminated label value");
          if (*p == '\\') {
            if (p[1] == 'n')
              g_string_append_c(v, '\n');
            else if (p[1] == '\\' || p[1] == '"')
              g_string_append_c(v, p[1]);
            else
              FAIL("a bad escape in a label value");
            p += 2;
            continue;
          }
          g_string_append_c(v, *p++);
        }
        p++;
        if (!g_utf8_validate(v->str, -1, NULL))
          FAIL("a label value that is not UTF-8");
        for (guint l = 0; l < labels->len; l++)
          if (g_str_has_prefix(labels->pdata[l], label) &&
              ((gchar *)labels->pdata[l])[strlen(label)] == '=')
            FAIL("label %s twice", label);
        g_ptr_array_add(labels, g_strdup_printf("%s=\"%s\"", label, v->str));
        if (*p == ',')
          p++;
        else if (*p != '}')
          FAIL("no comma or brace after a label");
      }
      p++;
    }
    if (*p != ' ')
      FAIL("no space before the value");
    if (!read_value(p + 1, &value))
      FAIL("“%s” is not a value", p + 1);
    if (!is_shortest(p + 1, value))
      FAIL("“%s” is not the shortest form of its value", p + 1);
    family = family_of(e, name, &owned);
    if (family == NULL)
      FAIL("a sample of a family without TYPE");
    if (!g_hash_table_contains(helped, family))
      FAIL("a sample of a family without HELP");
    if (g_strcmp0(current, family) != 0) {
      if (g_hash_table_contains(closed, family))
        FAIL("samples of %s not together", family);
      if (current != NULL)
        g_hash_table_add(closed, g_steal_pointer(&current));
      current = g_strdup(family);
    }
    if (g_str_has_suffix(family, "_total") && value < 0)
      FAIL("a negative counter");
    g_ptr_array_sort(labels, compare_strings);
    key = g_string_new(name);
    g_string_append_c(key, '{');
    for (guint l = 0; l < labels->len; l++)
      g_string_append_printf(key, "%s%s", l > 0 ? "," : "",
                             (gchar *)labels->pdata[l]);
    g_string_append_c(key, '}');
    if (g_hash_table_contains(e->samples, key->str))
      FAIL("a second sample %s", key->str);
    {
      gdouble *v = g_new(gdouble, 1);
      gchar *stored = g_strdup(key->str); /* the table's; keys borrow it */
      *v = value;
      g_hash_table_insert(e->samples, stored, v);
      g_ptr_array_add(e->keys, stored);
    }
  }
#undef FAIL
  return g_steal_pointer(&e);
}

/* The labels of @key without "le", and its le value. */
static gchar *
split_le(const gchar *key, gdouble *le)
{
  const gchar *at = strstr(key, "le=\"");
  g_autoptr(GString) rest = g_string_new(NULL);
  const gchar *end;

  if (at == NULL)
    return NULL;
  end = strchr(at + 4, '"');
  {
    g_autofree gchar *v = g_strndup(at + 4, (gsize)(end - at - 4));
    read_value(v, le);
  }
  g_string_append_len(rest, key, at - key);
  end++;
  if (*end == ',')
    end++;
  else if (rest->len > 0 && rest->str[rest->len - 1] == ',')
    g_string_truncate(rest, rest->len - 1);
  g_string_append(rest, end);
  return g_string_free(g_steal_pointer(&rest), FALSE);
}

/* Every histogram: buckets in ascending le, cumulative, +Inf == _count,
 * and a _sum. Returns NULL, or what is wrong. */
static gchar *
check_histograms(Exposition *e)
{
  GHashTableIter iter;
  gpointer family, type;

  g_hash_table_iter_init(&iter, e->types);
  while (g_hash_table_iter_next(&iter, &family, &type)) {
    g_autofree gchar *bucket = NULL;
    g_autoptr(GHashTable) last_le =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);

    if (strcmp(type, "histogram") != 0)
      continue;
    bucket = g_strconcat(family, "_bucket{", NULL);
    for (guint i = 0; i < e->keys->len; i++) {
      const gchar *key = e->keys->pdata[i];
      gdouble le = 0, value = *(gdouble *)g_hash_table_lookup(e->samples, key);
      g_autofree gchar *series = NULL;
      gdouble *prev;

      if (!g_str_has_prefix(key, bucket))
        continue;
      series = split_le(key + strlen(family) + strlen("_bucket"), &le);
      if (series == NULL)
        return g_strdup_printf("%s has no le", key);
      prev = g_hash_table_lookup(last_le, series);
      if (prev != NULL && (le <= prev[0] || value < prev[1]))
        return g_strdup_printf("%s: buckets not ascending and cumulative", key);
      if (prev == NULL) {
        prev = g_new(gdouble, 2);
        g_hash_table_insert(last_le, g_strdup(series), prev);
      }
      prev[0] = le;
      prev[1] = value;
    }
    {
      GHashTableIter s;
      gpointer series, last;
      g_hash_table_iter_init(&s, last_le);
      while (g_hash_table_iter_next(&s, &series, &last)) {
        g_autofree gchar *count_key =
            g_strdup_printf("%s_count%s", (gchar *)family, (gchar *)series);
        g_autofree gchar *sum_key =
            g_strdup_printf("%s_sum%s", (gchar *)family, (gchar *)series);
        gdouble *count = g_hash_table_lookup(e->samples, count_key);
        if (!isinf(((gdouble *)last)[0]))
          return g_strdup_printf("%s%s: no +Inf bucket", (gchar *)family,
                                 (gchar *)series);
        if (count == NULL || *count != ((gdouble *)last)[1])
          return g_strdup_printf("%s: +Inf differs from _count", count_key);
        if (!g_hash_table_contains(e->samples, sum_key))
          return g_strdup_printf("%s missing", sum_key);
      }
    }
  }
  return NULL;
}

/* Parses @text and checks its histograms, failing the test otherwise. */
static Exposition *
scrape_text(const gchar *text)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *bad = NULL;
  Exposition *e = parse_exposition(text, &why);

  ck_assert_msg(e != NULL, "not a valid exposition: %s", why);
  bad = check_histograms(e);
  ck_assert_msg(bad == NULL, "%s", bad);
  return e;
}

/* Counters and histograms of @before are all in @after, none smaller. */
static void
assert_monotonic(Exposition *before, Exposition *after)
{
  for (guint i = 0; i < before->keys->len; i++) {
    const gchar *key = before->keys->pdata[i];
    g_autofree gchar *name = g_strndup(key, strcspn(key, "{"));
    g_autofree gchar *owned = NULL;
    const gchar *family = family_of(before, name, &owned);
    const gchar *type = g_hash_table_lookup(before->types, family);
    gdouble *then = g_hash_table_lookup(before->samples, key);
    gdouble *now = g_hash_table_lookup(after->samples, key);

    if (strcmp(type, "gauge") == 0)
      continue;
    ck_assert_msg(now != NULL, "%s vanished", key);
    ck_assert_msg(*now >= *then, "%s went down from %g to %g", key, *then,
                  *now);
  }
}

/* The value of sample @name with @labels ("" or `a="b",c="d"`, sorted),
 * or -1 if there is none. */
static gdouble
value_of(Exposition *e, const gchar *name, const gchar *labels)
{
  g_autofree gchar *key = g_strdup_printf("%s{%s}", name, labels);
  gdouble *v = g_hash_table_lookup(e->samples, key);

  return v != NULL ? *v : -1;
}

static gchar *
series(const gchar *task, const gchar *queue)
{
  return g_strdup_printf("queue=\"%s\",task=\"%s\"", queue, task);
}

/* ---- The parser refuses what is not the format --------------------------- */

START_TEST(parser_refuses_bad_expositions)
{
  static const struct {
    const gchar *text, *why;
  } bad[] = {
      {"# TYPE a gauge\n# HELP a x\na 1", "newline"},
      {"# HELP a x\n# TYPE a gauge\n\na 1\n", "empty line"},
      {"# HELP a x\n# TYPE a gauge\n# hello\na 1\n", "neither HELP nor TYPE"},
      {"# HELP a x\n# TYPE a gauge\na{b=\"1\"} x\n", "not a value"},
      {"# HELP a x\n# TYPE a gauge\na{b=1} 1\n", "bad label"},
      {"# HELP a x\n# TYPE a gauge\na{b=\"\\q\"} 1\n", "bad escape"},
      {"# HELP a x\n# TYPE a gauge\na{b=\"1\",b=\"2\"} 1\n", "twice"},
      {"# HELP a x\n# TYPE a gauge\na{b=\"1\" 1\n", "comma or brace"},
      {"# HELP a x\n# TYPE a gauge\n1a 1\n", "metric name"},
      {"a 1\n", "without TYPE"},
      {"# TYPE a gauge\na 1\n", "without HELP"},
      {"# HELP a x\n# TYPE a gauge\na  1\n", "not a value"},
      {"# HELP a x\n# TYPE a gauge\na 1\na 2\n", "second sample"},
      {"# HELP a x\n# TYPE a gauge\n# HELP b y\n# TYPE b gauge\na 1\nb 1\n"
       "a{c=\"d\"} 1\n",
       "not together"},
      {"# HELP a x\n# TYPE a gauge\na 1\n# TYPE a gauge\n", "after samples"},
      {"# HELP a_total x\n# TYPE a_total counter\na_total -1\n", "negative"},
      {"# HELP a x\n# TYPE a counter\na 1\n", "_total"},
      {"# HELP a x\n# TYPE a summary\na 1\n", "type"},
      {"# HELP a x\n# TYPE a gauge\na 0.0029970000000000001\n", "shortest"},
      {"# HELP a x\n# TYPE a gauge\na 1.50\n", "shortest"},
  };
  static const gchar *const bad_histograms[] = {
      /* not cumulative */
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
      "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
      /* +Inf differs from _count */
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
      "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
      /* no +Inf */
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\n"
      "h_count 1\n",
      /* no _sum */
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
  };
  static const gchar *good =
      "# HELP a A \\\\ gauge\\n.\n# TYPE a gauge\na 1\na{b=\"x\\\"y\\\\z\\n\"} "
      "2.5e-05\n# HELP h x\n# TYPE h histogram\nh_bucket{q=\"1\",le=\"0.5\"} "
      "1\nh_bucket{q=\"1\",le=\"+Inf\"} 2\nh_sum{q=\"1\"} 0.7\n"
      "h_count{q=\"1\"} 2\n";

  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree gchar *why = NULL;
    Exposition *e = parse_exposition(bad[i].text, &why);
    ck_assert_msg(e == NULL, "accepted: %s", bad[i].text);
    ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: %s", bad[i].text, why);
  }
  for (guint i = 0; i < G_N_ELEMENTS(bad_histograms); i++) {
    g_autofree gchar *why = NULL;
    g_autofree gchar *bad_one = NULL;
    g_autoptr(Exposition) e = parse_exposition(bad_histograms[i], &why);
    ck_assert_msg(e != NULL, "%s", why);
    bad_one = check_histograms(e);
    ck_assert_msg(bad_one != NULL, "accepted: %s", bad_histograms[i]);
  }
  {
    g_autoptr(Exposition) e = scrape_text(good);
    ck_assert(value_of(e, "a", "b=\"x\"y\\z\n\"") == 2.5e-05);
    ck_assert(value_of(e, "h_count", "q=\"1\"") == 2);
  }
}
END_TEST

/* ---- Rendering, on fixed inputs ------------------------------------------ */

/* Every family a worker exposes: docs/observability.md lists the same. */
static const gchar *const worker_families[] = {
    "sluice_worker_info",
    "sluice_worker_start_time_seconds",
    "sluice_worker_slots",
    "sluice_worker_tasks_running",
    "sluice_worker_tasks_held",
    "sluice_worker_tasks_prefetched",
    "sluice_worker_broker_up",
    "sluice_worker_broker_errors_total",
    "sluice_worker_broker_outages_total",
    "sluice_worker_lease_renewals_lost_total",
    "sluice_worker_stale_settles_total",
    "sluice_worker_tasks_timed_out_total",
    "sluice_worker_reclaimed_total",
    "sluice_worker_late_results_discarded_total",
    "sluice_worker_children_started_total",
    "sluice_worker_children_lost_total",
    "sluice_worker_tasks_started_total",
    "sluice_worker_tasks_succeeded_total",
    "sluice_worker_tasks_failed_total",
    "sluice_worker_tasks_retried_total",
    "sluice_worker_tasks_cancelled_total",
    "sluice_worker_tasks_released_total",
    "sluice_worker_tasks_deferred_total",
    "sluice_worker_tasks_dead_lettered_total",
    "sluice_worker_task_duration_seconds",
    "sluice_worker_task_start_latency_seconds",
};

static void
assert_line(const gchar *text, const gchar *line)
{
  g_autofree gchar *needle = g_strconcat("\n", line, "\n", NULL);

  ck_assert_msg(strstr(text, needle) != NULL, "no line [%s] in:\n%s", line,
                text);
}

START_TEST(render_worker_metrics)
{
  SluiceWorkerMetrics m;
  SluiceTaskMetrics *t, *odd;
  g_autofree gchar *text = NULL;
  g_autoptr(Exposition) e = NULL;
  guint64 *one = g_new(guint64, 1);

  sluice_worker_metrics_init(&m);
  m.worker_id = g_strdup("w-1");
  m.broker = g_strdup("memory");
  m.started_at_ms = G_GINT64_CONSTANT(1893456000123);
  m.concurrency = 8;
  m.running = 3;
  m.held = 10;
  m.prefetched = 5;
  m.broker_reachable = FALSE;
  m.broker_errors = 4;
  m.broker_outages = 1;
  m.stats.leases_lost = 2;
  m.stats.stale_settles = 9;
  t = sluice_worker_metrics_add_task(&m, "mail.send", "default");
  t->started = 7;
  t->succeeded = 5;
  t->failed = 3;
  t->retried = 2;
  t->dead_lettered = 1;
  *one = 1;
  g_hash_table_insert(t->dead_lettered_by_reason, g_strdup("max_attempts"),
                      one);
  ck_assert_uint_eq(t->duration.n_bounds, 21);
  t->duration.buckets[0] = 2;                    /* <= 100 us */
  t->duration.buckets[3] = 3;                    /* <= 1 ms */
  t->duration.buckets[t->duration.n_bounds] = 1; /* over an hour */
  t->duration.count = 6;
  t->duration.sum = 3601.25;
  ck_assert_uint_eq(t->latency.n_bounds, 18);
  odd = sluice_worker_metrics_add_task(&m, "odd\"name\\", "q\nx");

  text = sluice_worker_metrics_to_prometheus(&m);
  e = scrape_text(text);
  for (guint i = 0; i < G_N_ELEMENTS(worker_families); i++)
    ck_assert_msg(g_hash_table_contains(e->types, worker_families[i]),
                  "no family %s", worker_families[i]);
  ck_assert_uint_eq(g_hash_table_size(e->types), G_N_ELEMENTS(worker_families));
  assert_line(text,
              "sluice_worker_info{worker_id=\"w-1\",broker=\"memory\"} 1");
  assert_line(text, "sluice_worker_start_time_seconds 1893456000.123");
  assert_line(text, "sluice_worker_slots 8");
  assert_line(text, "sluice_worker_tasks_prefetched 5");
  assert_line(text, "sluice_worker_broker_up 0");
  assert_line(text, "sluice_worker_broker_outages_total 1");
  assert_line(text, "sluice_worker_lease_renewals_lost_total 2");
  assert_line(text, "sluice_worker_stale_settles_total 9");
  assert_line(text, "# TYPE sluice_worker_tasks_started_total counter");
  assert_line(text, "sluice_worker_tasks_started_total{task=\"mail.send\","
                    "queue=\"default\"} 7");
  assert_line(text, "sluice_worker_tasks_dead_lettered_total{task=\"mail."
                    "send\",queue=\"default\",reason=\"max_attempts\"} 1");
  assert_line(text, "# TYPE sluice_worker_task_duration_seconds histogram");
  assert_line(text, "sluice_worker_task_duration_seconds_bucket{task=\"mail."
                    "send\",queue=\"default\",le=\"0.0001\"} 2");
  assert_line(text, "sluice_worker_task_duration_seconds_bucket{task=\"mail."
                    "send\",queue=\"default\",le=\"0.00025\"} 2");
  assert_line(text, "sluice_worker_task_duration_seconds_bucket{task=\"mail."
                    "send\",queue=\"default\",le=\"0.001\"} 5");
  assert_line(text, "sluice_worker_task_duration_seconds_bucket{task=\"mail."
                    "send\",queue=\"default\",le=\"3600\"} 5");
  assert_line(text, "sluice_worker_task_duration_seconds_bucket{task=\"mail."
                    "send\",queue=\"default\",le=\"+Inf\"} 6");
  assert_line(text, "sluice_worker_task_duration_seconds_sum{task=\"mail."
                    "send\",queue=\"default\"} 3601.25");
  assert_line(text, "sluice_worker_task_duration_seconds_count{task=\"mail."
                    "send\",queue=\"default\"} 6");
  assert_line(text, "sluice_worker_task_start_latency_seconds_bucket{task="
                    "\"mail.send\",queue=\"default\",le=\"0.001\"} 0");
  /* Label values are escaped; the parser reads them back. */
  assert_line(text, "sluice_worker_tasks_started_total{task=\"odd\\\"name\\\\"
                    "\",queue=\"q\\nx\"} 0");
  ck_assert(value_of(e, "sluice_worker_tasks_succeeded_total",
                     "queue=\"q\nx\",task=\"odd\"name\\\"") == 0);
  ck_assert_ptr_nonnull(odd);
  sluice_worker_metrics_clear(&m);
}
END_TEST

START_TEST(render_broker_stats)
{
  SluiceBrokerStats st;
  g_autofree gchar *text = NULL;
  g_autoptr(Exposition) e = NULL;

  sluice_broker_stats_init(&st);
  sluice_broker_stats_add_queue(&st, "default", 3);
  sluice_broker_stats_add_queue(&st, "mail", 0);
  st.scheduled = 4;
  st.in_flight = -1; /* redis-fast cannot tell */
  sluice_broker_stats_add_dead_letters(&st, "max_attempts", 2);
  sluice_broker_stats_add_dead_letters(&st, "custom", 1);
  st.dead_letters = 4; /* one the broker cannot tell the reason of */
  st.dead_letters_dropped = 0;
  sluice_broker_stats_add_worker_info(&st, "w-alive", 1, TRUE, NULL);
  sluice_broker_stats_add_worker_info(&st, "w-dead", 1, FALSE, NULL);
  st.stale_settles = -1;

  text = sluice_broker_stats_to_prometheus(&st);
  e = scrape_text(text);
  assert_line(text, "sluice_queue_ready{queue=\"default\"} 3");
  assert_line(text, "sluice_queue_ready{queue=\"mail\"} 0");
  assert_line(text, "sluice_scheduled 4");
  ck_assert(!g_hash_table_contains(e->types, "sluice_in_flight"));
  ck_assert(!g_hash_table_contains(e->types, "sluice_stale_settles_total"));
  assert_line(text, "sluice_dead_letters{reason=\"max_attempts\"} 2");
  assert_line(text, "sluice_dead_letters{reason=\"expired\"} 0");
  assert_line(text, "sluice_dead_letters{reason=\"custom\"} 1");
  assert_line(text, "sluice_dead_letters{reason=\"(unknown)\"} 1");
  assert_line(text,
              "sluice_dead_letters_dropped_total{reason=\"malformed\"} 0");
  assert_line(text, "sluice_workers_alive 1");
  assert_line(text, "sluice_workers_seen 2");
  sluice_broker_stats_clear(&st);
}
END_TEST

/* ---- What a worker collects (memory broker, fake clock) ------------------ */

static gboolean
task_ok(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return TRUE;
}

static gboolean
task_fail(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "always fails");
  return FALSE;
}

static gboolean
task_fatal(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return sluice_task_context_fail(ctx, error, "never retry this");
}

/* Runs until cancelled, then holds its thread until the test opens the
 * gate, so that its settlement by the timeout is counted before it
 * returns. */
static struct {
  GMutex lock;
  GCond cond;
  gboolean running;
  gboolean open;
} gate;

static void
wake_gate(GCancellable *cancellable, gpointer data)
{
  g_mutex_lock(&gate.lock);
  g_cond_broadcast(&gate.cond);
  g_mutex_unlock(&gate.lock);
}

static gboolean
task_sleepy(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  GCancellable *c = sluice_task_context_get_cancellable(ctx);
  gulong handler = g_cancellable_connect(c, G_CALLBACK(wake_gate), NULL, NULL);

  g_mutex_lock(&gate.lock);
  gate.running = TRUE;
  g_cond_broadcast(&gate.cond);
  while (!g_cancellable_is_cancelled(c) || !gate.open)
    g_cond_wait(&gate.cond, &gate.lock);
  g_mutex_unlock(&gate.lock);
  g_cancellable_disconnect(c, handler);
  return !g_cancellable_set_error_if_cancelled(c, error);
}

static SluiceRegistry *
collect_registry(void)
{
  SluiceRegistry *r = sluice_registry_new();

  sluice_registry_add(r, "t.ok", task_ok, NULL, NULL, NULL, NULL);
  sluice_registry_add(r, "t.fail", task_fail, NULL, NULL, NULL, NULL);
  sluice_registry_add(r, "t.fatal", task_fatal, NULL, NULL, NULL, NULL);
  sluice_registry_add(r, "t.sleepy", task_sleepy, NULL, NULL, NULL, NULL);
  return r;
}

static gchar *
enqueue_on(SluiceTestHarness *h, const gchar *task, const gchar *queue,
           guint max_attempts)
{
  SluiceEnqueueOptions eo;
  g_autoptr(GError) error = NULL;
  gchar *id;

  sluice_enqueue_options_init(&eo);
  eo.queue = queue;
  if (max_attempts > 0)
    eo.options.retry.max_attempts = max_attempts;
  eo.options.retry.initial_backoff_ms = 1000;
  id = sluice_client_enqueue(sluice_test_harness_get_client(h), task, NULL, &eo,
                             &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  return id;
}

static SluiceTaskMetrics *
series_of(SluiceWorkerMetrics *m, const gchar *task, const gchar *queue)
{
  for (guint i = 0; i < m->tasks->len; i++) {
    SluiceTaskMetrics *t = m->tasks->pdata[i];
    if (strcmp(t->task, task) == 0 && strcmp(t->queue, queue) == 0)
      return t;
  }
  ck_abort_msg("no series for %s on %s", task, queue);
  return NULL;
}

static guint64
reason_count(SluiceTaskMetrics *t, const gchar *reason)
{
  const guint64 *n = g_hash_table_lookup(t->dead_lettered_by_reason, reason);
  return n != NULL ? *n : 0;
}

static guint64
bucket_total(const SluiceHistogram *h)
{
  guint64 n = 0;

  for (guint i = 0; i <= h->n_bounds; i++)
    n += h->buckets[i];
  return n;
}

START_TEST(collects_every_outcome_per_task_and_queue)
{
  g_autoptr(SluiceRegistry) registry = collect_registry();
  const gchar *queues[] = {"high", "low", NULL};
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) garbage = g_bytes_new_static("garbage", 7);
  g_autofree gchar *text = NULL;
  g_autoptr(Exposition) e = NULL;
  g_autofree gchar *cancelled = NULL;
  SluiceSubmit raw = {.id = "raw-1", .queue = "low"};
  SluiceWorkerOptions wo;
  SluiceWorkerMetrics m;
  SluiceTaskMetrics *t;
  guint64 started = 0;

  sluice_worker_options_init(&wo);
  wo.queues = queues;
  wo.concurrency = 2;
  wo.retry.jitter = SLUICE_OFF;
  wo.track_state = TRUE;
  h = sluice_test_harness_new(registry, &wo, &error);
  g_free(enqueue_on(h, "t.ok", "high", 0));
  g_free(enqueue_on(h, "t.ok", "high", 0));
  g_free(enqueue_on(h, "t.fail", "low", 2));
  g_free(enqueue_on(h, "t.fatal", "high", 0));
  g_free(enqueue_on(h, "t.nobody", "high", 0));
  raw.payload = garbage;
  ck_assert(sluice_broker_enqueue(sluice_test_harness_get_broker(h), &raw, 1,
                                  &error));
  cancelled = enqueue_on(h, "t.ok", "low", 0);
  ck_assert_int_eq(sluice_client_cancel(sluice_test_harness_get_client(h),
                                        cancelled, &error),
                   SLUICE_CANCEL_REVOKED);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  /* t.fail's second attempt, due a second later. */
  sluice_test_harness_advance(h, 1000);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));

  sluice_worker_get_metrics(sluice_test_harness_get_worker(h), &m);
  ck_assert_str_eq(m.broker, "memory");
  ck_assert_uint_eq(m.concurrency, 2);
  ck_assert_uint_eq(m.running, 0);
  ck_assert_uint_eq(m.held, 0);
  ck_assert(m.broker_reachable);
  ck_assert_int_eq(m.started_at_ms, SLUICE_TEST_EPOCH_MS);
  /* By task name, then in the worker's queue order; no others. */
  ck_assert_uint_eq(m.tasks->len, 6);
  ck_assert_str_eq(((SluiceTaskMetrics *)m.tasks->pdata[0])->task,
                   SLUICE_METRICS_TASK_UNDECODABLE);
  ck_assert_str_eq(((SluiceTaskMetrics *)m.tasks->pdata[4])->queue, "high");
  ck_assert_str_eq(((SluiceTaskMetrics *)m.tasks->pdata[5])->queue, "low");

  t = series_of(&m, "t.ok", "high");
  ck_assert_uint_eq(t->started, 2);
  ck_assert_uint_eq(t->succeeded, 2);
  ck_assert_uint_eq(t->duration.count, 2);
  ck_assert_uint_eq(bucket_total(&t->duration), 2);
  ck_assert_uint_eq(t->latency.count, 2);
  t = series_of(&m, "t.ok", "low");
  ck_assert_uint_eq(t->started, 0);
  ck_assert_uint_eq(t->cancelled, 1);
  ck_assert_uint_eq(t->latency.count, 0);
  t = series_of(&m, "t.fail", "low");
  ck_assert_uint_eq(t->started, 2);
  ck_assert_uint_eq(t->failed, 2);
  ck_assert_uint_eq(t->retried, 1);
  ck_assert_uint_eq(t->dead_lettered, 1);
  ck_assert_uint_eq(reason_count(t, SLUICE_DLQ_MAX_ATTEMPTS), 1);
  ck_assert_uint_eq(t->duration.count, 2);
  /* Both attempts started when they were due (the fake clock did not move
   * in between): the second attempt's wait is counted from its due time,
   * not from the first enqueue a second earlier. */
  ck_assert_uint_eq(t->latency.count, 2);
  ck_assert_uint_eq(t->latency.buckets[0], 2);
  ck_assert(t->latency.sum == 0);
  t = series_of(&m, "t.fatal", "high");
  ck_assert_uint_eq(t->failed, 1);
  ck_assert_uint_eq(t->retried, 0);
  ck_assert_uint_eq(reason_count(t, SLUICE_DLQ_NON_RETRYABLE), 1);
  t = series_of(&m, SLUICE_METRICS_TASK_UNREGISTERED, "high");
  ck_assert_uint_eq(t->started, 0);
  ck_assert_uint_eq(t->deferred, 1);
  t = series_of(&m, SLUICE_METRICS_TASK_UNDECODABLE, "low");
  ck_assert_uint_eq(reason_count(t, SLUICE_DLQ_MALFORMED), 1);
  ck_assert_uint_eq(t->dead_lettered, 1);

  for (guint i = 0; i < m.tasks->len; i++)
    started += ((SluiceTaskMetrics *)m.tasks->pdata[i])->started;
  ck_assert_uint_eq(started, m.stats.started);
  text = sluice_worker_metrics_to_prometheus(&m);
  e = scrape_text(text);
  ck_assert(value_of(e, "sluice_worker_tasks_retried_total",
                     "queue=\"low\",task=\"t.fail\"") == 1);
  sluice_worker_metrics_clear(&m);
}
END_TEST

/* A task settled by its timeout before it returned counts the time it ran
 * until then. */
START_TEST(a_timed_out_task_counts_its_time_until_the_timeout)
{
  g_autoptr(SluiceRegistry) registry = collect_registry();
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(GError) error = NULL;
  SluiceEnqueueOptions eo;
  g_autofree gchar *id = NULL;
  SluiceWorker *worker;
  SluiceWorkerMetrics m;
  SluiceTaskMetrics *t;
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  h = sluice_test_harness_new(registry, NULL, &error);
  worker = sluice_test_harness_get_worker(h);
  sluice_enqueue_options_init(&eo);
  eo.options.timeout_ms = 100;
  eo.options.retry.max_attempts = 1;
  id = sluice_client_enqueue(sluice_test_harness_get_client(h), "t.sleepy",
                             NULL, &eo, &error);
  ck_assert(sluice_worker_start(worker, &error));
  g_mutex_lock(&gate.lock);
  while (!gate.running)
    g_cond_wait(&gate.cond, &gate.lock);
  g_mutex_unlock(&gate.lock);
  sluice_test_harness_advance(h, 100);
  for (;;) {
    sluice_worker_get_metrics(worker, &m);
    t = m.tasks->len > 0 ? series_of(&m, "t.sleepy", "default") : NULL;
    if (t != NULL && t->dead_lettered == 1)
      break;
    sluice_worker_metrics_clear(&m);
    ck_assert_msg(g_get_monotonic_time() < deadline, "never settled");
    g_usleep(1000);
  }
  ck_assert_uint_eq(t->failed, 1);
  ck_assert_uint_eq(t->duration.count, 1);
  /* 100 ms by the fake clock: the bucket (0.05, 0.1]. */
  ck_assert(t->duration.bounds[9] == 0.1);
  ck_assert_uint_eq(t->duration.buckets[9], 1);
  ck_assert_uint_eq(m.stats.timed_out, 1);
  sluice_worker_metrics_clear(&m);
  g_mutex_lock(&gate.lock);
  gate.open = TRUE;
  g_cond_broadcast(&gate.cond);
  g_mutex_unlock(&gate.lock);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
}
END_TEST

/* Snapshots taken while 20,000 tasks run are each a valid exposition, and
 * no counter goes down from one to the next. */
typedef struct {
  SluiceWorker *worker;
  gint stop;
  GPtrArray *texts;
} Scraper;

static gpointer
scraper_main(gpointer data)
{
  Scraper *s = data;

  while (!g_atomic_int_get(&s->stop) && s->texts->len < 400) {
    SluiceWorkerMetrics m;
    sluice_worker_get_metrics(s->worker, &m);
    g_ptr_array_add(s->texts, sluice_worker_metrics_to_prometheus(&m));
    sluice_worker_metrics_clear(&m);
    g_usleep(500);
  }
  return NULL;
}

START_TEST(snapshots_while_tasks_run_are_consistent)
{
  g_autoptr(SluiceRegistry) registry = collect_registry();
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree SluiceEnqueueRequest *requests =
      g_new0(SluiceEnqueueRequest, 1000);
  Scraper s = {0};
  GThread *thread;
  SluiceWorkerMetrics m;

  for (guint i = 0; i < 1000; i++)
    requests[i].task = "t.ok";
  for (guint i = 0; i < 20; i++) {
    g_autoptr(GPtrArray) ids =
        sluice_client_enqueue_batch(client, requests, 1000, &error);
    ck_assert(ids != NULL);
  }
  worker = sluice_worker_new(broker, registry, NULL, &error);
  s.worker = worker;
  s.texts = g_ptr_array_new_with_free_func(g_free);
  /* One snapshot before the run, one after it, and what the scraper takes
   * between: on a busy machine the scraper may get no turn while the
   * tasks run, and the before/after pair is still compared. */
  sluice_worker_get_metrics(worker, &m);
  g_ptr_array_add(s.texts, sluice_worker_metrics_to_prometheus(&m));
  sluice_worker_metrics_clear(&m);
  thread = g_thread_new("scraper", scraper_main, &s);
  ck_assert(sluice_worker_run_until_idle(worker, 120000, NULL, &error));
  g_atomic_int_set(&s.stop, 1);
  g_thread_join(thread);
  sluice_worker_get_metrics(worker, &m);
  g_ptr_array_add(s.texts, sluice_worker_metrics_to_prometheus(&m));
  ck_assert_uint_eq(series_of(&m, "t.ok", "default")->succeeded, 20000);
  ck_assert_uint_eq(series_of(&m, "t.ok", "default")->duration.count, 20000);
  sluice_worker_metrics_clear(&m);
  {
    Exposition *before = NULL;
    for (guint i = 0; i < s.texts->len; i++) {
      Exposition *now = scrape_text(s.texts->pdata[i]);
      if (before != NULL) {
        assert_monotonic(before, now);
        exposition_free(before);
      }
      before = now;
    }
    exposition_free(before);
  }
  g_ptr_array_unref(s.texts);
}
END_TEST

/* ---- The command: processes, HTTP ---------------------------------------- */

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
  return sluice_test_command_new(modes[mode_index], server, "sluice-metrics");
}

#define assert_status(run, expected)                                           \
  ck_assert_msg((run)->status == (expected),                                   \
                "exit status %d, expected %d\nstdout: %s\nstderr: %s",         \
                (run)->status, (expected), (run)->out, (run)->err)

/* A `sluice worker` or `sluice exporter`, its log in a file. */
typedef struct {
  GSubprocess *proc;
  gchar *log;
  gchar *http; /* "http://127.0.0.1:PORT" (or https), from its log */
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

/* Starts `sluice ARGV...` and waits until its log names the address it
 * serves on (@ready, then "http://...") and, for a worker, that it is
 * ready. */
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
    const gchar *http = at != NULL ? strstr(at, "http") : NULL;
    const gchar *host = http != NULL ? strstr(http, "://") : NULL;

    if (host != NULL &&
        (strcmp(argv[0], "worker") != 0 || strstr(log, " ready: ") != NULL)) {
      /* "http://HOST:PORT" (or https) ends at the path's slash. */
      p->http = g_strndup(http, (gsize)(strchr(host + 3, '/') - http));
      return p;
    }
    ck_assert_msg(g_subprocess_get_identifier(p->proc) != NULL,
                  "%s exited before it served:\n%s", argv[0], log);
    ck_assert_msg(g_get_monotonic_time() < deadline, "%s never served:\n%s",
                  argv[0], log);
    g_usleep(20 * 1000);
  }
}

/* `sluice worker` with the demo module, JSON logs, a metrics endpoint on
 * a free port, and the options given (NULL-terminated). */
static Proc *worker_start(Ctx *ctx, ...) G_GNUC_NULL_TERMINATED;
static Proc *
worker_start(Ctx *ctx, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  va_list ap;

  g_ptr_array_add(argv, (gpointer) "worker");
  g_ptr_array_add(argv, (gpointer) "--module");
  g_ptr_array_add(argv, (gpointer)DEMO_MODULE);
  g_ptr_array_add(argv, (gpointer) "--log-format=json");
  g_ptr_array_add(argv, (gpointer) "--metrics-listen");
  g_ptr_array_add(argv, (gpointer) "127.0.0.1:0");
  va_start(ap, ctx);
  for (const gchar *a = va_arg(ap, const gchar *); a != NULL;
       a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  va_end(ap);
  g_ptr_array_add(argv, NULL);
  return proc_start(ctx, "serving metrics on ",
                    (const gchar *const *)argv->pdata);
}

/* SIGTERM, then waits for a graceful exit (status 0). Returns the log. */
static gchar *
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
  return g_steal_pointer(&log);
}

/* GET @url with a real HTTP client; its status in @status. */
static gchar *
http_get(const gchar *base, const gchar *path, guint *status,
         gchar **content_type)
{
  g_autoptr(SoupSession) session = soup_session_new();
  g_autofree gchar *url = g_strconcat(base, path, NULL);
  g_autoptr(SoupMessage) msg = soup_message_new("GET", url);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) body = NULL;
  gsize size;
  const gchar *data;

  ck_assert_msg(msg != NULL, "bad URL %s", url);
  body = soup_session_send_and_read(session, msg, NULL, &error);
  ck_assert_msg(body != NULL, "GET %s: %s", url,
                error != NULL ? error->message : "");
  *status = soup_message_get_status(msg);
  if (content_type != NULL)
    *content_type = g_strdup(soup_message_headers_get_content_type(
        soup_message_get_response_headers(msg), NULL));
  data = g_bytes_get_data(body, &size);
  return g_strndup(data != NULL ? data : "", size);
}

/* Scrapes /metrics and reads the exposition strictly. */
static Exposition *
scrape(const Proc *p)
{
  guint status = 0;
  g_autofree gchar *type = NULL;
  g_autofree gchar *text = http_get(p->http, "/metrics", &status, &type);

  ck_assert_msg(status == 200, "/metrics answered %u: %s", status, text);
  ck_assert_str_eq(type, "text/plain");
  return scrape_text(text);
}

/* Polls /healthz until it answers @want with @needle (nullable) in its
 * body; returns the body. */
static gchar *
wait_for_health(const Proc *p, guint want, const gchar *needle)
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  for (;;) {
    guint status = 0;
    gchar *body = http_get(p->http, "/healthz", &status, NULL);
    if (status == want && (needle == NULL || strstr(body, needle) != NULL))
      return body;
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "/healthz stayed %u (%s), never %u with “%s”", status, body,
                  want, needle != NULL ? needle : "");
    g_free(body);
    g_usleep(50 * 1000);
  }
}

/* ---- `sluice worker --metrics-listen` ------------------------------------ */

static void
wait_result(Ctx *ctx, const gchar *id, int expected_status)
{
  g_autoptr(Run) r = cli(ctx, "result", id, "--wait", "90s", NULL);

  assert_status(r, expected_status);
}

/* Scrapes until @done holds on a scrape, checking each against the one
 * before; returns the last. */
static Exposition *
scrape_until(const Proc *w, Exposition **previous,
             gboolean (*done)(Exposition *e))
{
  gint64 deadline = g_get_monotonic_time() + PATIENCE_US;

  for (;;) {
    Exposition *e = scrape(w);
    if (*previous != NULL) {
      assert_monotonic(*previous, e);
      exposition_free(*previous);
    }
    *previous = e;
    if (done(e))
      return e;
    ck_assert_msg(g_get_monotonic_time() < deadline, "never got there");
    g_usleep(50 * 1000);
  }
}

static gboolean
both_sleepers_run(Exposition *e)
{
  return value_of(e, "sluice_worker_tasks_running", "") >= 2;
}

static gdouble dead_lettered(Exposition *e, const gchar *task,
                             const gchar *reason);

static gdouble
sample_of(Exposition *e, const gchar *name, const gchar *task)
{
  g_autofree gchar *labels = series(task, "default");

  return value_of(e, name, labels);
}

/* Everything enqueued by test_worker_metrics_while_tasks_run has been
 * counted: a settlement is counted just after the broker took it, so a
 * final record can be read a moment before. */
static gboolean
all_counted(Exposition *e)
{
  return sample_of(e, "sluice_worker_tasks_succeeded_total", "demo.noop") ==
             20 &&
         dead_lettered(e, "demo.fail", "max_attempts") == 1 &&
         dead_lettered(e, "demo.fatal", "non_retryable") == 1 &&
         sample_of(e, "sluice_worker_tasks_succeeded_total", "demo.flaky") ==
             1 &&
         sample_of(e, "sluice_worker_tasks_succeeded_total", "demo.sleep") ==
             2 &&
         dead_lettered(e, "demo.sleep", "max_attempts") == 1 &&
         sample_of(e, "sluice_worker_tasks_deferred_total", "(unregistered)") >=
             1;
}

#define ck_assert_sample(e, name, task, want)                                  \
  do {                                                                         \
    g_autofree gchar *_l = series(task, "default");                            \
    gdouble _v = value_of(e, name, _l);                                        \
    ck_assert_msg(_v == (want), "%s{%s} is %g, expected %g", name, _l, _v,     \
                  (gdouble)(want));                                            \
  } while (0)

static gdouble
dead_lettered(Exposition *e, const gchar *task, const gchar *reason)
{
  g_autofree gchar *labels = g_strdup_printf(
      "queue=\"default\",reason=\"%s\",task=\"%s\"", reason, task);

  return value_of(e, "sluice_worker_tasks_dead_lettered_total", labels);
}

START_TEST(test_worker_metrics_while_tasks_run)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autoptr(Proc) w = worker_start(ctx, "--concurrency", "4", "--backoff",
                                   "10ms", "--no-jitter", NULL);
  g_autoptr(GPtrArray) noops = g_ptr_array_new_with_free_func(g_free);
  g_autofree gchar *sleep1 = NULL, *sleep2 = NULL, *fail = NULL;
  g_autofree gchar *fatal = NULL, *flaky = NULL, *slow = NULL;
  g_autofree gchar *unknown = NULL, *text = NULL;
  g_autofree gchar *le1 = NULL;
  Exposition *previous = NULL;
  Exposition *mid, *final;
  guint status = 0;

  /* Before any task: every family, no series yet. */
  previous = scrape(w);
  ck_assert(value_of(previous, "sluice_worker_slots", "") == 4);
  ck_assert(value_of(previous, "sluice_worker_broker_up", "") == 1);

  for (guint i = 0; i < 20; i++)
    g_ptr_array_add(noops, enqueue(ctx, "demo.noop", NULL));
  fail = enqueue(ctx, "demo.fail", "--max-attempts", "2", NULL);
  fatal = enqueue(ctx, "demo.fatal", NULL);
  flaky = enqueue(ctx, "demo.flaky", "{\"fail_times\": 1}", NULL);
  slow = enqueue(ctx, "demo.sleep", "{\"ms\": 60000}", "--timeout", "300ms",
                 "--max-attempts", "1", NULL);
  unknown = enqueue(ctx, "demo.nobody", NULL);
  /* The sleepers last, and long: the scrape below must find them running
   * however slowly a busy machine ran the enqueues before it. */
  sleep1 = enqueue(ctx, "demo.sleep", "{\"ms\": 5000}", NULL);
  sleep2 = enqueue(ctx, "demo.sleep", "{\"ms\": 5000}", NULL);

  /* A scrape while tasks run... */
  mid = scrape_until(w, &previous, both_sleepers_run);
  ck_assert(value_of(mid, "sluice_worker_tasks_held", "") >= 2);
  /* ...and one after they are done. */
  wait_result(ctx, sleep1, 0);
  wait_result(ctx, sleep2, 0);
  for (guint i = 0; i < noops->len; i++)
    wait_result(ctx, noops->pdata[i], 0);
  wait_result(ctx, fail, 3);
  wait_result(ctx, fatal, 3);
  wait_result(ctx, flaky, 0);
  wait_result(ctx, slow, 3);
  final = scrape_until(w, &previous, all_counted);

  ck_assert_sample(final, "sluice_worker_tasks_started_total", "demo.noop", 20);
  ck_assert_sample(final, "sluice_worker_tasks_succeeded_total", "demo.noop",
                   20);
  ck_assert_sample(final, "sluice_worker_task_duration_seconds_count",
                   "demo.noop", 20);
  ck_assert_sample(final, "sluice_worker_task_start_latency_seconds_count",
                   "demo.noop", 20);
  ck_assert_sample(final, "sluice_worker_tasks_failed_total", "demo.fail", 2);
  ck_assert_sample(final, "sluice_worker_tasks_retried_total", "demo.fail", 1);
  ck_assert(dead_lettered(final, "demo.fail", "max_attempts") == 1);
  ck_assert_sample(final, "sluice_worker_tasks_failed_total", "demo.fatal", 1);
  ck_assert_sample(final, "sluice_worker_tasks_retried_total", "demo.fatal", 0);
  ck_assert(dead_lettered(final, "demo.fatal", "non_retryable") == 1);
  ck_assert_sample(final, "sluice_worker_tasks_failed_total", "demo.flaky", 1);
  ck_assert_sample(final, "sluice_worker_tasks_retried_total", "demo.flaky", 1);
  ck_assert_sample(final, "sluice_worker_tasks_succeeded_total", "demo.flaky",
                   1);
  ck_assert_sample(final, "sluice_worker_tasks_started_total", "demo.sleep", 3);
  ck_assert_sample(final, "sluice_worker_tasks_succeeded_total", "demo.sleep",
                   2);
  ck_assert_sample(final, "sluice_worker_tasks_failed_total", "demo.sleep", 1);
  ck_assert(dead_lettered(final, "demo.sleep", "max_attempts") == 1);
  ck_assert_sample(final, "sluice_worker_task_duration_seconds_count",
                   "demo.sleep", 3);
  /* The two sleeps of 5 s are above 1 s (a lower bound, not a race). */
  {
    g_autofree gchar *sleeps = series("demo.sleep", "default");
    le1 = g_strdup_printf("le=\"1\",%s", sleeps);
  }
  ck_assert(
      value_of(final, "sluice_worker_task_duration_seconds_bucket", le1) <= 1);
  ck_assert(value_of(final, "sluice_worker_tasks_timed_out_total", "") == 1);
  ck_assert_sample(final, "sluice_worker_tasks_started_total", "(unregistered)",
                   0);
  /* Task ids never become labels. */
  text = http_get(w->http, "/metrics", &status, NULL);
  ck_assert_ptr_null(strstr(text, fail));
  ck_assert_ptr_null(strstr(text, unknown));
  exposition_free(previous); /* the last scrape, final */
  g_free(proc_stop(w));
}
END_TEST

/* /healthz is 503 while Redis is down, 200 before and after; /metrics
 * says so too. */
START_TEST(test_healthz_follows_the_broker)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(Ctx) ctx = ctx_new(_i, server);
  g_autoptr(Proc) w = worker_start(ctx, NULL);
  g_autofree gchar *ok = NULL, *down = NULL, *up = NULL;
  g_autoptr(Exposition) during = NULL;
  g_autoptr(Exposition) after = NULL;

  ok = wait_for_health(w, 200, "ok");
  sluice_test_redis_kill(server, SIGKILL);
  down = wait_for_health(w, 503, "the broker is unreachable");
  during = scrape(w);
  ck_assert(value_of(during, "sluice_worker_broker_up", "") == 0);
  ck_assert(value_of(during, "sluice_worker_broker_outages_total", "") == 1);
  ck_assert(value_of(during, "sluice_worker_broker_errors_total", "") >= 1);
  ck_assert(sluice_test_redis_restart(server, &error));
  up = wait_for_health(w, 200, "ok");
  after = scrape(w);
  assert_monotonic(during, after);
  ck_assert(value_of(after, "sluice_worker_broker_up", "") == 1);
  g_free(proc_stop(w));
}
END_TEST

/* A Redis that stops answering (SIGSTOP) stalls the housekeeping thread
 * in a call: /healthz says so before any call has failed, and is 200
 * again once Redis answers. */
START_TEST(test_healthz_sees_stuck_housekeeping)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(Ctx) ctx = ctx_new(1, server);
  g_autoptr(Proc) w = worker_start(ctx, NULL);
  g_autofree gchar *ok = NULL, *stuck = NULL, *again = NULL;

  ok = wait_for_health(w, 200, "ok");
  kill(sluice_test_redis_pid(server), SIGSTOP);
  stuck = wait_for_health(w, 503, "housekeeping");
  kill(sluice_test_redis_pid(server), SIGCONT);
  again = wait_for_health(w, 200, "ok");
  g_free(proc_stop(w));
}
END_TEST

/* Where it listens is checked, and a port in use is a clear error. */
START_TEST(test_metrics_listen_errors)
{
  g_autoptr(Ctx) ctx = ctx_new(0, NULL);
  g_autoptr(Proc) w = worker_start(ctx, NULL);
  const gchar *port = strrchr(w->http, ':') + 1;
  g_autofree gchar *taken = g_strdup_printf("127.0.0.1:%s", port);
  g_autoptr(Run) busy = NULL;
  static const gchar *const bad[] = {"nowhere:80", ":9464", "127.0.0.1:99999",
                                     "[::1]9464", "10.0.0.1:x"};

  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(Run) r = cli(ctx, "worker", "--module", DEMO_MODULE,
                           "--metrics-listen", bad[i], NULL);
    assert_status(r, 2);
    ck_assert_msg(strstr(r->err, "--metrics-listen") != NULL &&
                      strstr(r->err, "127.0.0.1:9464") != NULL &&
                      strchr(r->err, '\n') == r->err + strlen(r->err) - 1,
                  "%s", r->err);
  }
  busy = cli(ctx, "worker", "--module", DEMO_MODULE, "--metrics-listen", taken,
             NULL);
  assert_status(busy, 1);
  ck_assert_msg(strstr(busy->err, "cannot listen on") != NULL, "%s", busy->err);
  g_free(proc_stop(w));
}
END_TEST

/* ---- `sluice exporter` --------------------------------------------------- */

static JsonObject *
stats_json(Ctx *ctx, JsonParser *parser)
{
  g_autoptr(Run) r = cli(ctx, "stats", "--json", NULL);
  g_autoptr(GError) error = NULL;

  assert_status(r, 0);
  ck_assert_msg(json_parser_load_from_data(parser, r->out, -1, &error), "%s",
                r->out);
  return json_node_get_object(json_parser_get_root(parser));
}

static Proc *
exporter_start(Ctx *ctx, const gchar *interval)
{
  const gchar *argv[] = {"exporter",   "--listen", "127.0.0.1:0",
                         "--interval", interval,   NULL};

  return proc_start(ctx, "serving on ", argv);
}

/* ---- HTTPS: --tls-cert, --metrics-tls-cert, client certificates --------- */

/* Runs @argv (a tool on PATH) in @dir; its exit status (-1: killed), its
 * output in @out (nullable) and its errors in @err (nullable). */
static int
tool(const gchar *dir, const gchar *const *argv, gchar **out, gchar **err)
{
  g_autoptr(GError) error = NULL;
  gchar *o = NULL, *e = NULL;
  gint wait_status = 0;

  ck_assert_msg(g_spawn_sync(dir, (gchar **)argv, NULL, G_SPAWN_SEARCH_PATH,
                             NULL, NULL, &o, &e, &wait_status, &error),
                "%s: %s", argv[0], error != NULL ? error->message : "");
  if (out != NULL)
    *out = o;
  else
    g_free(o);
  if (err != NULL)
    *err = e;
  else
    g_free(e);
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

static void
openssl(const gchar *dir, const gchar *const *argv)
{
  g_autofree gchar *err = NULL;

  ck_assert_msg(tool(dir, argv, NULL, &err) == 0, "%s %s: %s", argv[0], argv[1],
                err);
}

/* A key and a certificate NAME.key, NAME.pem in @dir, signed by ca (NULL:
 * by itself, as a CA), with the extensions of @ext. */
static void
make_certificate(const gchar *dir, const gchar *name, const gchar *ca,
                 const gchar *ext)
{
  g_autofree gchar *key = g_strdup_printf("%s.key", name);
  g_autofree gchar *pem = g_strdup_printf("%s.pem", name);
  g_autofree gchar *csr = g_strdup_printf("%s.csr", name);
  g_autofree gchar *ext_file = g_strdup_printf("%s/%s.ext", dir, name);
  g_autofree gchar *subject = g_strdup_printf("/CN=sluice-test-%s", name);
  g_autofree gchar *key_path = g_build_filename(dir, key, NULL);
  g_autofree gchar *ca_pem = g_strdup_printf("%s.pem", ca != NULL ? ca : "");
  g_autofree gchar *ca_key = g_strdup_printf("%s.key", ca != NULL ? ca : "");
  const gchar *req[] = {"openssl", "req",      "-newkey",
                        "ec",      "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes",  "-keyout",  key,
                        "-subj",   subject,    "-out",
                        csr,       NULL};
  const gchar *self[] = {"openssl", "x509", "-req",  "-in", csr,
                         "-key",    key,    "-days", "2",   "-extfile",
                         ext_file,  "-out", pem,     NULL};
  const gchar *sign[] = {
      "openssl", "x509",     "-req",   "-in",         csr,      "-CA",
      ca_pem,    "-CAkey",   ca_key,   "-set_serial", "0x7e57", "-days",
      "2",       "-extfile", ext_file, "-out",        pem,      NULL};

  ck_assert(g_file_set_contents(ext_file, ext, -1, NULL));
  openssl(dir, req);
  openssl(dir, ca != NULL ? sign : self);
  ck_assert_int_eq(g_chmod(key_path, 0600), 0);
}

#define CA_EXT                                                                 \
  "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
#define SERVER_EXT                                                             \
  "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"   \
  "basicConstraints=CA:FALSE\n"
#define CLIENT_EXT "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"

/* In @dir: a CA (ca), a server certificate it signed for 127.0.0.1 and
 * localhost (server), a client certificate it signed (client), and one
 * another CA signed (stranger). */
static void
make_pki(const gchar *dir)
{
  make_certificate(dir, "ca", NULL, CA_EXT);
  make_certificate(dir, "server", "ca", SERVER_EXT);
  make_certificate(dir, "client", "ca", CLIENT_EXT);
  make_certificate(dir, "other-ca", NULL, CA_EXT);
  make_certificate(dir, "stranger", "other-ca", CLIENT_EXT);
}

/* `curl` of @url with the options given (NULL-terminated): its exit status
 * (0: served, with --fail an HTTP status below 400); the body in @body. */
static int curl(const gchar *dir, gchar **body, const gchar *url,
                ...) G_GNUC_NULL_TERMINATED;
static int
curl(const gchar *dir, gchar **body, const gchar *url, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  va_list ap;

  for (const gchar *const *a =
           (const gchar *const[]){"curl", "--silent", "--show-error", "--fail",
                                  "--noproxy", "*", "--max-time", "60", NULL};
       *a != NULL; a++)
    g_ptr_array_add(argv, (gpointer)*a);
  va_start(ap, url);
  for (const gchar *a = va_arg(ap, const gchar *); a != NULL;
       a = va_arg(ap, const gchar *))
    g_ptr_array_add(argv, (gpointer)a);
  va_end(ap);
  g_ptr_array_add(argv, (gpointer)url);
  g_ptr_array_add(argv, NULL);
  return tool(dir, (const gchar *const *)argv->pdata, body, NULL);
}

/* GET @url with libsoup's client, trusting the CA of @dir only, with the
 * client certificate NAME.pem/NAME.key of @dir (NULL: none): the status,
 * or 0 and the error in @why when no answer came. */
static guint
soup_get(const gchar *dir, const gchar *url, const gchar *client, gchar **why)
{
  g_autofree gchar *ca = g_build_filename(dir, "ca.pem", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GTlsDatabase) db = g_tls_file_database_new(ca, &error);
  g_autoptr(SoupSession) session = NULL;
  g_autoptr(SoupMessage) msg = soup_message_new("GET", url);
  g_autoptr(GBytes) body = NULL;

  ck_assert_msg(db != NULL, "%s", error != NULL ? error->message : "");
  session = soup_session_new_with_options("tls-database", db, NULL);
  if (client != NULL) {
    g_autofree gchar *pem = g_strdup_printf("%s/%s.pem", dir, client);
    g_autofree gchar *key = g_strdup_printf("%s/%s.key", dir, client);
    g_autoptr(GTlsCertificate) cert =
        g_tls_certificate_new_from_files(pem, key, &error);

    ck_assert_msg(cert != NULL, "%s", error != NULL ? error->message : "");
    soup_message_set_tls_client_certificate(msg, cert);
  }
  body = soup_session_send_and_read(session, msg, NULL, &error);
  if (body == NULL) {
    *why = g_strdup(error->message);
    return 0;
  }
  *why = NULL;
  return soup_message_get_status(msg);
}

static guint
count_of(const gchar *text, const gchar *needle)
{
  guint n = 0;

  for (const gchar *p = strstr(text, needle); p != NULL;
       p = strstr(p + 1, needle))
    n++;
  return n;
}

/* The processes that serve HTTPS run GnuTLS, which GIO loads with
 * glib-networking's module (dlopen), so its thread-local variables are
 * dynamic TLS. Under AddressSanitizer, the runtime GCC 12 ships (up to GCC
 * 13 and LLVM 16) records a dynamic TLS block through a heuristic for the
 * glibc 2.19 layout: a block at 16 bytes past a page boundary is taken to
 * have a header, whose two words it reads as the block's start and size.
 * glibc has had no such header since 2.25; LeakSanitizer then scans a
 * range that is no memory and its tracer dies at exit ("Tracer caught
 * signal 11" after "DTLS ... at 0x3000001b2-0x13000012b4" with
 * LSAN_OPTIONS=verbosity=1:log_threads=1; google/sanitizers#1322). So
 * those processes, and only they, are run with intercept_tls_get_addr=0:
 * leaks are still checked, from every root but the dynamic TLS of modules
 * loaded with dlopen (the libraries a program starts with, libsluice
 * among them, have static TLS, which is scanned). Outside ASan the option
 * is read by nobody. */
static void
env_for_https(Ctx *ctx)
{
  const gchar *asan = g_environ_getenv(ctx->env, "ASAN_OPTIONS");
  g_autofree gchar *with =
      asan != NULL && asan[0] != '\0'
          ? g_strconcat(asan, ":intercept_tls_get_addr=0", NULL)
          : g_strdup("intercept_tls_get_addr=0");

  ctx->env = g_environ_setenv(ctx->env, "ASAN_OPTIONS", with, TRUE);
}

/* The dashboard, the exporter and a worker's metrics endpoint over HTTPS
 * with a test CA, scraped by curl and by libsoup's client: the certificate
 * is checked (no --cacert: refused), the client certificate the metrics
 * endpoints ask for is required (none, or one of another CA: refused in
 * the handshake), and only a listener off loopback without TLS warns. */
START_TEST(test_https_endpoints)
{
  g_autoptr(Ctx) ctx = ctx_new(0, NULL);
  const gchar *d = ctx->dir;
  g_autofree gchar *ca = g_build_filename(d, "ca.pem", NULL);
  g_autofree gchar *cert = g_build_filename(d, "server.pem", NULL);
  g_autofree gchar *key = g_build_filename(d, "server.key", NULL);
  g_autofree gchar *conf = g_build_filename(d, "exporter.conf", NULL);
  g_autofree gchar *conf_text = NULL;
  g_autoptr(Proc) web = NULL;
  g_autoptr(Proc) x = NULL;
  g_autoptr(Proc) w = NULL;
  g_autoptr(Proc) open = NULL;
  g_autofree gchar *url = NULL;
  g_autofree gchar *why = NULL;
  g_autofree gchar *log = NULL;

  env_for_https(ctx);
  make_pki(d);

  /* The dashboard: the server's certificate only. */
  {
    const gchar *argv[] = {"web", "--listen",  "127.0.0.1:0", "--tls-cert",
                           cert,  "--tls-key", key,           NULL};
    g_autofree gchar *page = NULL;
    g_autofree gchar *api = NULL;

    web = proc_start(ctx, "serving on ", argv);
    ck_assert_msg(g_str_has_prefix(web->http, "https://127.0.0.1:"), "%s",
                  web->http);
    url = g_strconcat(web->http, "/", NULL);
    ck_assert_int_eq(curl(d, &page, url, "--cacert", ca, NULL), 0);
    ck_assert_msg(strstr(page, "<html") != NULL, "%s", page);
    /* Not a CA the system trusts. */
    ck_assert_int_ne(curl(d, NULL, url, NULL), 0);
    ck_assert_msg(soup_get(d, url, NULL, &why) == 200, "%s", why);
    g_clear_pointer(&url, g_free);
    g_clear_pointer(&why, g_free);
    url = g_strconcat(web->http, "/api/overview", NULL);
    ck_assert_int_eq(curl(d, &api, url, "--cacert", ca, NULL), 0);
    ck_assert_msg(strstr(api, "\"queues\"") != NULL, "%s", api);
    g_clear_pointer(&url, g_free);
  }

  /* The exporter, from the keys of its group, asking for client
   * certificates. */
  conf_text = g_strdup_printf("[exporter]\nlisten=127.0.0.1:0\ntls-cert=%s\n"
                              "tls-key=%s\ntls-client-ca=%s\n",
                              cert, key, ca);
  ck_assert(g_file_set_contents(conf, conf_text, -1, NULL));
  {
    const gchar *argv[] = {"exporter", "--config", conf, NULL};
    g_autofree gchar *text = NULL;

    x = proc_start(ctx, "serving on ", argv);
    ck_assert_msg(g_str_has_prefix(x->http, "https://127.0.0.1:"), "%s",
                  x->http);
    url = g_strconcat(x->http, "/metrics", NULL);
    ck_assert_int_ne(curl(d, NULL, url, "--cacert", ca, NULL), 0);
    ck_assert_int_ne(curl(d, NULL, url, "--cacert", ca, "--cert",
                          "stranger.pem", "--key", "stranger.key", NULL),
                     0);
    ck_assert_int_eq(curl(d, &text, url, "--cacert", ca, "--cert", "client.pem",
                          "--key", "client.key", NULL),
                     0);
    g_autoptr(Exposition) e = scrape_text(text);
    ck_assert(value_of(e, "sluice_exporter_broker_up", "") == 1);
    ck_assert_msg(soup_get(d, url, "client", &why) == 200, "%s", why);
    g_clear_pointer(&why, g_free);
    ck_assert_uint_eq(soup_get(d, url, NULL, &why), 0);
    g_clear_pointer(&why, g_free);
    g_clear_pointer(&url, g_free);
  }

  /* A worker's endpoint, from its options. */
  w = worker_start(ctx, "--metrics-tls-cert", cert, "--metrics-tls-key", key,
                   "--metrics-tls-client-ca", ca, NULL);
  ck_assert_msg(g_str_has_prefix(w->http, "https://127.0.0.1:"), "%s", w->http);
  {
    g_autofree gchar *text = NULL;

    url = g_strconcat(w->http, "/metrics", NULL);
    ck_assert_int_ne(curl(d, NULL, url, "--cacert", ca, NULL), 0);
    ck_assert_int_eq(curl(d, &text, url, "--cacert", ca, "--cert", "client.pem",
                          "--key", "client.key", NULL),
                     0);
    exposition_free(scrape_text(text));
    ck_assert_msg(soup_get(d, url, "client", &why) == 200, "%s", why);
    g_clear_pointer(&why, g_free);
    g_clear_pointer(&url, g_free);
  }

  /* Clear text to the network: one warning naming the flags. */
  {
    const gchar *argv[] = {"exporter", "--listen", "0.0.0.0:0", NULL};
    open = proc_start(ctx, "serving on ", argv);
    log = proc_log(open);
    ck_assert_msg(count_of(log, "clear text") == 1 &&
                      strstr(log, "--tls-cert FILE and --tls-key FILE") != NULL,
                  "%s", log);
    g_free(proc_stop(open));
  }
  g_free(log);
  log = proc_stop(w);
  ck_assert_msg(strstr(log, "clear text") == NULL, "%s", log);
  g_free(log);
  log = proc_stop(x);
  ck_assert_msg(strstr(log, "clear text") == NULL, "%s", log);
  g_free(log);
  log = proc_stop(web);
  ck_assert_msg(strstr(log, "clear text") == NULL, "%s", log);
}
END_TEST

/* Each mistake is refused before anything starts, in one line that names
 * the option and the fix. */
START_TEST(test_https_setting_errors)
{
  g_autoptr(Ctx) ctx = ctx_new(0, NULL);
  const gchar *d = ctx->dir;
  g_autofree gchar *ca = g_build_filename(d, "ca.pem", NULL);
  g_autofree gchar *cert = g_build_filename(d, "server.pem", NULL);
  g_autofree gchar *key = g_build_filename(d, "server.key", NULL);
  g_autofree gchar *open_key = g_build_filename(d, "open.key", NULL);
  g_autofree gchar *key_text = NULL;
  struct {
    const gchar *argv[12];
    const gchar *says;
  } cases[] = {
      {{"web", "--listen", "127.0.0.1:0", "--tls-cert", cert, NULL},
       "--tls-cert without --tls-key"},
      {{"web", "--listen", "127.0.0.1:0", "--tls-key", key, NULL},
       "--tls-key without --tls-cert"},
      {{"web", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key",
        open_key, NULL},
       "can be read by other users"},
      {{"exporter", "--listen", "127.0.0.1:0", "--tls-cert", cert, NULL},
       "--tls-cert without --tls-key"},
      {{"exporter", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key",
        open_key, NULL},
       "chmod 600"},
      {{"exporter", "--listen", "127.0.0.1:0", "--tls-client-ca", ca, NULL},
       "give --tls-cert FILE and --tls-key FILE too"},
      {{"exporter", "--listen", "127.0.0.1:0", "--tls-cert", key, "--tls-key",
        key, NULL},
       "cannot be used"},
      {{"worker", "--module", DEMO_MODULE, "--metrics-listen", "127.0.0.1:0",
        "--metrics-tls-key", key, NULL},
       "--metrics-tls-key without --metrics-tls-cert"},
      {{"worker", "--module", DEMO_MODULE, "--metrics-listen", "127.0.0.1:0",
        "--metrics-tls-cert", cert, "--metrics-tls-key", open_key, NULL},
       "can be read by other users"},
      {{"worker", "--module", DEMO_MODULE, "--metrics-tls-cert", cert,
        "--metrics-tls-key", key, NULL},
       "needs --metrics-listen"},
  };

  make_pki(d);
  ck_assert(g_file_get_contents(key, &key_text, NULL, NULL));
  ck_assert(g_file_set_contents(open_key, key_text, -1, NULL));
  ck_assert_int_eq(g_chmod(open_key, 0644), 0);
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(Run) r = NULL;

    g_ptr_array_add(argv, (gpointer)SLUICE_BIN);
    for (guint j = 0; cases[i].argv[j] != NULL; j++)
      g_ptr_array_add(argv, (gpointer)cases[i].argv[j]);
    g_ptr_array_add(argv, NULL);
    {
      g_autoptr(GError) error = NULL;
      gint wait_status = 0;

      r = g_new0(Run, 1);
      ck_assert(g_spawn_sync(NULL, (gchar **)argv->pdata, ctx->env, 0, NULL,
                             NULL, &r->out, &r->err, &wait_status, &error));
      r->status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
    }
    assert_status(r, 2);
    ck_assert_msg(strstr(r->err, cases[i].says) != NULL &&
                      strchr(r->err, '\n') == r->err + strlen(r->err) - 1,
                  "%s: %s", cases[i].argv[0], r->err);
  }
}
END_TEST

START_TEST(test_exporter_matches_stats)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(Proc) w = worker_start(ctx, NULL);
  g_autoptr(Proc) x = NULL;
  g_autoptr(Exposition) e = NULL;
  g_autoptr(Exposition) cached = NULL;
  g_autofree gchar *fatal = enqueue(ctx, "demo.fatal", NULL);
  JsonObject *stats;
  JsonArray *queues, *workers;
  JsonObject *by_reason;
  guint alive = 0;

  wait_result(ctx, fatal, 3);
  g_free(proc_stop(w));
  for (guint i = 0; i < 3; i++)
    g_free(enqueue(ctx, "demo.noop", NULL));
  g_free(enqueue(ctx, "demo.noop", "--queue", "mail", NULL));
  g_free(enqueue(ctx, "demo.noop", "--delay", "1h", NULL));

  /* An interval of an hour: every scrape below shares one read. */
  x = exporter_start(ctx, "1h");
  e = scrape(x);
  stats = stats_json(ctx, parser);
  queues = json_object_get_array_member(stats, "queues");
  ck_assert_uint_eq(json_array_get_length(queues), 2);
  for (guint i = 0; i < json_array_get_length(queues); i++) {
    JsonObject *q = json_array_get_object_element(queues, i);
    g_autofree gchar *l = g_strdup_printf(
        "queue=\"%s\"", json_object_get_string_member(q, "name"));
    ck_assert(value_of(e, "sluice_queue_ready", l) ==
              json_object_get_int_member(q, "ready"));
  }
  ck_assert(value_of(e, "sluice_queue_ready", "queue=\"default\"") == 3);
  ck_assert(value_of(e, "sluice_scheduled", "") ==
            json_object_get_int_member(stats, "scheduled"));
  ck_assert(value_of(e, "sluice_scheduled", "") == 1);
  if (json_object_get_null_member(stats, "in_flight"))
    ck_assert(!g_hash_table_contains(e->types, "sluice_in_flight"));
  else
    ck_assert(value_of(e, "sluice_in_flight", "") ==
              json_object_get_int_member(stats, "in_flight"));
  by_reason = json_object_get_object_member(stats, "dead_letters_by_reason");
  ck_assert(value_of(e, "sluice_dead_letters", "reason=\"non_retryable\"") ==
            json_object_get_int_member(by_reason, "non_retryable"));
  ck_assert(value_of(e, "sluice_dead_letters", "reason=\"non_retryable\"") ==
            1);
  ck_assert(value_of(e, "sluice_dead_letters", "reason=\"max_attempts\"") == 0);
  ck_assert(value_of(e, "sluice_dead_letters_dropped_total",
                     "reason=\"non_retryable\"") ==
            json_object_get_int_member(stats, "dead_letters_dropped"));
  workers = json_object_get_array_member(stats, "workers");
  for (guint i = 0; i < json_array_get_length(workers); i++)
    alive += json_object_get_boolean_member(
        json_array_get_object_element(workers, i), "alive");
  ck_assert(value_of(e, "sluice_workers_alive", "") == alive);
  ck_assert(value_of(e, "sluice_workers_seen", "") ==
            json_array_get_length(workers));
  ck_assert(value_of(e, "sluice_exporter_broker_up", "") == 1);
  ck_assert(value_of(e, "sluice_exporter_reads_total", "") == 1);

  /* Within the interval, scrapes get the figures of that one read. */
  g_free(enqueue(ctx, "demo.noop", NULL));
  cached = scrape(x);
  ck_assert(value_of(cached, "sluice_queue_ready", "queue=\"default\"") == 3);
  ck_assert(value_of(cached, "sluice_exporter_reads_total", "") == 1);
  assert_monotonic(e, cached);
  g_free(proc_stop(x));
}
END_TEST

/* A short interval: after it passes, the next scrape reads again; an
 * unreachable broker is up 0, without gauges, and 503 on /healthz. */
START_TEST(test_exporter_reads_again_and_survives_an_outage)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(Ctx) ctx = ctx_new(_i, server);
  g_autoptr(Proc) x = exporter_start(ctx, "100ms");
  g_autoptr(Exposition) first = NULL;
  g_autoptr(Exposition) second = NULL;
  g_autoptr(Exposition) down = NULL;
  g_autofree gchar *ok = NULL, *bad = NULL;

  g_free(enqueue(ctx, "demo.noop", NULL));
  first = scrape(x);
  ck_assert(value_of(first, "sluice_queue_ready", "queue=\"default\"") == 1);
  g_free(enqueue(ctx, "demo.noop", NULL));
  g_usleep(200 * 1000); /* longer than the interval */
  second = scrape(x);
  ck_assert(value_of(second, "sluice_queue_ready", "queue=\"default\"") == 2);
  ck_assert(value_of(second, "sluice_exporter_reads_total", "") == 2);
  ok = wait_for_health(x, 200, "ok");

  sluice_test_redis_kill(server, SIGKILL);
  g_usleep(200 * 1000);
  down = scrape(x);
  ck_assert(value_of(down, "sluice_exporter_broker_up", "") == 0);
  ck_assert(value_of(down, "sluice_exporter_read_errors_total", "") >= 1);
  ck_assert(!g_hash_table_contains(down->types, "sluice_queue_ready"));
  bad = wait_for_health(x, 503, "cannot read the broker");
  ck_assert_ptr_null(strstr(bad, "password"));
  ck_assert(sluice_test_redis_restart(server, &error));
  g_free(wait_for_health(x, 200, "ok"));
  g_free(proc_stop(x));
}
END_TEST

/* ---- Trace context through the command ----------------------------------- */

#define CLI_TRACEPARENT                                                        \
  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* `sluice enqueue --header traceparent=...` refuses a malformed one; a
 * valid one is on every JSON log line the worker writes about the task. */
START_TEST(test_trace_context_in_the_worker_log)
{
  g_autoptr(Ctx) ctx = ctx_new(_i, NULL);
  g_autoptr(Run) refused =
      cli(ctx, "enqueue", "demo.noop", "--header", "traceparent=00-abc", NULL);
  g_autoptr(Proc) w = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *log = NULL;
  g_auto(GStrv) lines = NULL;
  guint traced = 0;

  assert_status(refused, 2);
  ck_assert_msg(strstr(refused->err, "not a W3C trace context") != NULL, "%s",
                refused->err);
  w = worker_start(ctx, "--backoff", "10ms", NULL);
  id = enqueue(ctx, "demo.flaky", "{\"fail_times\": 1}", "--header",
               "traceparent=" CLI_TRACEPARENT, NULL);
  wait_result(ctx, id, 0);
  log = proc_stop(w);
  lines = g_strsplit(log, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *o;

    if (lines[i][0] == '\0' ||
        !json_parser_load_from_data(parser, lines[i], -1, NULL))
      continue;
    o = json_node_get_object(json_parser_get_root(parser));
    if (g_strcmp0(json_object_get_string_member_with_default(o, "task_id", ""),
                  id) != 0)
      continue;
    ck_assert_msg(g_strcmp0(json_object_get_string_member_with_default(
                                o, "traceparent", ""),
                            CLI_TRACEPARENT) == 0,
                  "no traceparent: %s", lines[i]);
    ck_assert_str_eq(json_object_get_string_member(o, "trace_id"),
                     "4bf92f3577b34da6a3ce929d0e0e4736");
    traced++;
  }
  /* Both attempts' lines, and the retry's. */
  ck_assert_uint_ge(traced, 3);
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
  Suite *s = suite_create("metrics");
  TCase *render = tcase_create("render");
  TCase *collect = tcase_create("collect");
  TCase *http = tcase_create("http");
  TCase *https = tcase_create("https");
  int n_modes = reliable_mode_available() ? 2 : 1;
  SRunner *runner;
  int failed;

  g_mutex_init(&gate.lock);
  g_cond_init(&gate.cond);

  tcase_set_timeout(render, 60);
  tcase_add_test(render, parser_refuses_bad_expositions);
  tcase_add_test(render, render_worker_metrics);
  tcase_add_test(render, render_broker_stats);
  suite_add_tcase(s, render);

  tcase_set_timeout(collect, 300);
  tcase_add_test(collect, collects_every_outcome_per_task_and_queue);
  tcase_add_test(collect, a_timed_out_task_counts_its_time_until_the_timeout);
  tcase_add_test(collect, snapshots_while_tasks_run_are_consistent);
  suite_add_tcase(s, collect);

  tcase_add_unchecked_fixture(http, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(http, 300);
  tcase_add_loop_test(http, test_worker_metrics_while_tasks_run, 0, n_modes);
  tcase_add_loop_test(http, test_healthz_follows_the_broker, 0, n_modes);
  if (n_modes == 2)
    tcase_add_test(http, test_healthz_sees_stuck_housekeeping);
  tcase_add_test(http, test_metrics_listen_errors);
  tcase_add_loop_test(http, test_exporter_matches_stats, 0, n_modes);
  tcase_add_loop_test(http, test_exporter_reads_again_and_survives_an_outage, 0,
                      n_modes);
  tcase_add_loop_test(http, test_trace_context_in_the_worker_log, 0, n_modes);
  suite_add_tcase(s, http);

  tcase_add_unchecked_fixture(https, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(https, 300);
  tcase_add_test(https, test_https_endpoints);
  tcase_add_test(https, test_https_setting_errors);
  suite_add_tcase(s, https);

  runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}
