/* periodic.c - periodic schedules: intervals, cron expressions, and the
 * missed-run policy.
 *
 * Every worker that knows a schedule runs it; none is special. Each
 * occurrence has a deterministic task id, "periodic:<name>:<due ms>", and is
 * dispatched through the broker's claim_periodic slot: a compare-and-set on
 * the last dispatched occurrence plus the enqueue, in one atomic step. So
 * any number of workers dispatch each occurrence at most once, and a
 * restarted worker knows from the broker what it missed.
 *
 * Interval schedules are aligned to the epoch (every 60 s means at :00 of
 * each minute), so independent workers agree on occurrence times without
 * talking to each other. Cron expressions are the classic five fields,
 * evaluated in the schedule's time zone (UTC by default); when both
 * day-of-month and day-of-week are restricted a day matching either fires,
 * as in Vixie cron.
 *
 * Time zones: the cron walk runs over wall-clock minutes (seconds as if
 * the zone were UTC) and maps each match to an instant. A wall time the
 * clocks skip (spring forward) maps to the first instant after the gap,
 * and every skipped time maps to that same instant, so it runs once; a
 * wall time shown twice (fall back) maps to its first occurrence, and its
 * second is passed over because it maps to an instant already past.
 *
 * Overlap (SLUICE_OVERLAP_SKIP): before dispatching, the schedule looks up
 * its previous occurrence, the last one the broker recorded, by its id:
 * its record (every such occurrence is enqueued with a `queued` record
 * that its worker replaces) says whether it finished; without one, the
 * schedule says whether it waits for a retry.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

#define MISSED_MAX_DEFAULT 100
#define TICK_MAX_OCCURRENCES 100

typedef struct {
  guint64 minutes; /* bit n = minute n */
  guint32 hours;
  guint32 days;    /* bit n = day n (1..31) */
  guint16 months;  /* bit n = month n (1..12) */
  guint8 weekdays; /* bit n = weekday n (0 = Sunday) */
  gboolean days_restricted;
  gboolean weekdays_restricted;
} CronSpec;

struct _SluicePeriodic {
  SluiceKeyring *keyring; /* seals each occurrence's args; NULL = clear */
  gchar *name;
  gchar *task;
  gchar *queue;
  GBytes *args;
  gint64 interval_ms;
  gchar *cron;
  CronSpec spec;
  SluiceMissedPolicy missed;
  guint missed_max;
  GTimeZone *tz; /* NULL = UTC */
  SluiceOverlapPolicy overlap;
  gboolean started;
  gint64 next_due;
};

/* ---- Cron ---------------------------------------------------------------- */

static const gchar *const month_names[] = {"jan", "feb", "mar", "apr",
                                           "may", "jun", "jul", "aug",
                                           "sep", "oct", "nov", "dec"};
static const gchar *const day_names[] = {"sun", "mon", "tue", "wed",
                                         "thu", "fri", "sat"};

static gboolean
cron_error(GError **error, const gchar *cron, const gchar *why)
{
  g_autofree gchar *shown = sluice_text__escape(cron, -1, 100);

  g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
              "bad cron expression “%s”: %s (expected five fields: minute "
              "hour day-of-month month day-of-week, e.g. “*/15 9-17 * * "
              "mon-fri”)",
              shown, why);
  return FALSE;
}

/* Parses a number or, where @names is given, a three-letter name. */
static gboolean
parse_value(const gchar **p, const gchar *const *names, guint n_names,
            guint name_base, guint *out)
{
  const gchar *s = *p;
  guint64 v;
  gchar *end;

  if (names != NULL && g_ascii_isalpha(s[0])) {
    for (guint i = 0; i < n_names; i++) {
      if (g_ascii_strncasecmp(s, names[i], 3) == 0) {
        *out = i + name_base;
        *p = s + 3;
        return TRUE;
      }
    }
    return FALSE;
  }
  if (!g_ascii_isdigit(s[0]))
    return FALSE;
  v = g_ascii_strtoull(s, &end, 10);
  if (v > 1000)
    return FALSE;
  *out = (guint)v;
  *p = end;
  return TRUE;
}

/* One field: comma-separated items of `*`, `a`, `a-b`, each with an
 * optional `/step`. Sets bits lo..hi of @out. */
static gboolean
parse_field(const gchar *field, guint lo, guint hi, const gchar *const *names,
            guint n_names, guint name_base, guint64 *out, gboolean *restricted,
            const gchar *what, const gchar *cron, GError **error)
{
  g_auto(GStrv) items = g_strsplit(field, ",", -1);

  *out = 0;
  *restricted = strcmp(field, "*") != 0;
  for (guint i = 0; items[i] != NULL; i++) {
    const gchar *p = items[i];
    guint a, b, step = 1;
    g_autofree gchar *why = NULL;

    if (*p == '*') {
      a = lo;
      b = hi;
      p++;
    } else {
      if (!parse_value(&p, names, n_names, name_base, &a))
        goto bad;
      b = a;
      if (*p == '-') {
        p++;
        if (!parse_value(&p, names, n_names, name_base, &b))
          goto bad;
      } else if (*p == '/') {
        b = hi; /* "a/step" runs from a to the end of the range */
      }
    }
    if (*p == '/') {
      p++;
      if (!parse_value(&p, NULL, 0, 0, &step) || step == 0)
        goto bad;
    }
    if (*p != '\0' || a < lo || b > hi || a > b)
      goto bad;
    for (guint v = a; v <= b; v += step)
      *out |= G_GUINT64_CONSTANT(1) << v;
    continue;
  bad : {
    g_autofree gchar *shown = sluice_text__escape(field, -1, 40);

    why = g_strdup_printf("the %s field “%s” is not valid (range %u-%u)", what,
                          shown, lo, hi);
    return cron_error(error, cron, why);
  }
  }
  return TRUE;
}

static gboolean
cron_parse(const gchar *cron, CronSpec *spec, GError **error)
{
  static const struct {
    const gchar *macro;
    const gchar *expr;
  } macros[] = {
      {"@hourly", "0 * * * *"},   {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"}, {"@weekly", "0 0 * * 0"},
      {"@monthly", "0 0 1 * *"},  {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
  };
  const gchar *expr = cron;
  g_auto(GStrv) split = NULL;
  const gchar *f[5];
  guint n = 0;
  guint64 bits;
  gboolean restricted;

  memset(spec, 0, sizeof *spec);
  for (gsize i = 0; i < G_N_ELEMENTS(macros); i++)
    if (g_strcmp0(cron, macros[i].macro) == 0)
      expr = macros[i].expr;

  /* Runs of blanks split into empty strings; skip them. */
  split = g_strsplit_set(expr, " \t", -1);
  for (guint i = 0; split[i] != NULL; i++) {
    if (split[i][0] == '\0')
      continue;
    if (n == 5) {
      n++;
      break;
    }
    f[n++] = split[i];
  }
  if (n != 5)
    return cron_error(error, cron, "it does not have exactly five fields");

  if (!parse_field(f[0], 0, 59, NULL, 0, 0, &spec->minutes, &restricted,
                   "minute", cron, error))
    return FALSE;
  if (!parse_field(f[1], 0, 23, NULL, 0, 0, &bits, &restricted, "hour", cron,
                   error))
    return FALSE;
  spec->hours = (guint32)bits;
  if (!parse_field(f[2], 1, 31, NULL, 0, 0, &bits, &spec->days_restricted,
                   "day-of-month", cron, error))
    return FALSE;
  spec->days = (guint32)bits;
  if (!parse_field(f[3], 1, 12, month_names, 12, 1, &bits, &restricted, "month",
                   cron, error))
    return FALSE;
  spec->months = (guint16)bits;
  if (!parse_field(f[4], 0, 7, day_names, 7, 0, &bits,
                   &spec->weekdays_restricted, "day-of-week", cron, error))
    return FALSE;
  /* 7 is Sunday too. */
  if (bits & (1u << 7))
    bits = (bits | 1u) & 0x7f;
  spec->weekdays = (guint8)bits;
  return TRUE;
}

static gboolean
cron_day_matches(const CronSpec *spec, GDateTime *dt)
{
  gboolean dom = (spec->days >> g_date_time_get_day_of_month(dt)) & 1;
  gboolean dow = (spec->weekdays >> (g_date_time_get_day_of_week(dt) % 7)) & 1;

  if (spec->days_restricted && spec->weekdays_restricted)
    return dom || dow;
  return dom && dow;
}

/* Cron is evaluated on GDateTime, which spans the years 1 to 9999: the
 * first and the last minute it can name, in seconds since the epoch. */
#define CRON_FIRST_S G_GINT64_CONSTANT(-62135596800) /* 0001-01-01T00:00Z */
#define CRON_LAST_S G_GINT64_CONSTANT(253402300740)  /* 9999-12-31T23:59Z */
#define CRON_SEARCH_S (G_GINT64_CONSTANT(5) * 366 * 24 * 3600)

/* Division rounding toward minus infinity: the minute of -1 ms is the one
 * that starts at -60000 ms, not the one at 0. */
static gint64
floor_div(gint64 a, gint64 b)
{
  gint64 q = a / b;

  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

typedef enum {
  CRON_FOUND,
  CRON_NONE_IN_FIVE_YEARS, /* an impossible date, such as 30 February */
  CRON_NONE_IN_RANGE,      /* none before the end of year 9999 */
} CronResult;

/* ---- Time zones ------------------------------------------------------------
 */

static GTimeZone *
zone_new(const gchar *name)
{
#if GLIB_CHECK_VERSION(2, 68, 0)
  return g_time_zone_new_identifier(name);
#else
  /* Before 2.68 an unknown name silently gives UTC: tell them apart. */
  GTimeZone *tz = g_time_zone_new(name);
  if (g_strcmp0(g_time_zone_get_identifier(tz), name) != 0) {
    g_time_zone_unref(tz);
    return NULL;
  }
  return tz;
#endif
}

/* The offset from UTC (seconds) in force at @utc_s. */
static gint64
zone_offset(GTimeZone *tz, gint64 utc_s)
{
  return g_time_zone_get_offset(
      tz, g_time_zone_find_interval(tz, G_TIME_TYPE_UNIVERSAL, utc_s));
}

/* The instant (UTC seconds) at which the wall clock of @tz shows @wall_s
 * (its fields read as if UTC): the first of two when the clocks go back
 * over it, the first instant after the gap when they skip it. Assumes at
 * most one change of offset within a day of it, as every zone has. */
static gint64
wall_to_utc(GTimeZone *tz, gint64 wall_s)
{
  gint64 before = zone_offset(tz, wall_s - 86400);
  gint64 after = zone_offset(tz, wall_s + 86400);
  gint64 offsets[2] = {before, after};
  gint64 best = G_MAXINT64;
  gint64 lo, hi, lo_offset;

  for (guint i = 0; i < 2; i++) {
    gint64 u = wall_s - offsets[i];
    if (zone_offset(tz, u) == offsets[i])
      best = MIN(best, u);
  }
  if (best != G_MAXINT64)
    return best;
  /* In the gap: the change of offset lies between the two candidates;
   * find its instant (a second's precision, a dozen steps for an hour). */
  lo = wall_s - MAX(before, after);
  hi = wall_s - MIN(before, after);
  lo_offset = zone_offset(tz, lo);
  while (hi - lo > 1) {
    gint64 mid = lo + (hi - lo) / 2;
    if (zone_offset(tz, mid) == lo_offset)
      lo = mid;
    else
      hi = mid;
  }
  return hi;
}

/* The first matching minute strictly after @after_ms, on the wall clock of
 * @tz (NULL = UTC); @after_ms must lie in
 * [CRON_FIRST_S * 1000 - 1, CRON_LAST_S * 1000 + 59999]. */
static CronResult
cron_next(const CronSpec *spec, GTimeZone *tz, gint64 after_ms, gint64 *out_ms)
{
  gint64 shift_ms =
      tz != NULL ? zone_offset(tz, floor_div(after_ms, 1000)) * 1000 : 0;
  /* Wall-clock seconds, on a minute, and never before the first minute
   * GDateTime can name (a zone west of UTC in year 1). */
  gint64 t =
      MAX((floor_div(after_ms + shift_ms, 60000) + 1) * 60, CRON_FIRST_S);
  gint64 limit = MIN(t + CRON_SEARCH_S, CRON_LAST_S + 60);

  while (t < limit) {
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(t);
    gint year = g_date_time_get_year(dt);
    gint month = g_date_time_get_month(dt);
    gint hour = g_date_time_get_hour(dt);
    gint minute = g_date_time_get_minute(dt);

    if (!((spec->months >> month) & 1)) {
      g_autoptr(GDateTime) next = NULL;

      if (year == 9999 && month == 12)
        break; /* no next month to name */
      next = g_date_time_new_utc(month == 12 ? year + 1 : year,
                                 month == 12 ? 1 : month + 1, 1, 0, 0, 0);
      t = g_date_time_to_unix(next);
      continue;
    }
    if (!cron_day_matches(spec, dt)) {
      t = t - hour * 3600 - minute * 60 + 24 * 3600;
      continue;
    }
    if (!((spec->hours >> hour) & 1)) {
      t = t - minute * 60 + 3600;
      continue;
    }
    if (!((spec->minutes >> minute) & 1)) {
      t += 60;
      continue;
    }
    if (tz == NULL) {
      *out_ms = t * 1000;
      return CRON_FOUND;
    }
    /* A wall time of the repeated hour whose first occurrence is past
     * (its second one, after the clocks went back) is passed over. */
    if (wall_to_utc(tz, t) * 1000 > after_ms) {
      *out_ms = wall_to_utc(tz, t) * 1000;
      return CRON_FOUND;
    }
    t += 60;
  }
  return limit == CRON_LAST_S + 60 ? CRON_NONE_IN_RANGE
                                   : CRON_NONE_IN_FIVE_YEARS;
}

gboolean
sluice_cron_next(const gchar *cron, gint64 after_ms, gint64 *out_next_ms,
                 GError **error)
{
  CronSpec spec;

  g_return_val_if_fail(cron != NULL, FALSE);
  g_return_val_if_fail(out_next_ms != NULL, FALSE);
  if (!cron_parse(cron, &spec, error))
    return FALSE;
  if (after_ms < CRON_FIRST_S * 1000 - 1 ||
      after_ms > CRON_LAST_S * 1000 + 59999) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "cron: %" G_GINT64_FORMAT
                " ms is outside the times cron can name (0001-01-01T00:00Z "
                "to 9999-12-31T23:59Z, %" G_GINT64_FORMAT
                " to %" G_GINT64_FORMAT " ms since the epoch)",
                after_ms, CRON_FIRST_S * 1000, CRON_LAST_S * 1000);
    return FALSE;
  }
  switch (cron_next(&spec, NULL, after_ms, out_next_ms)) {
  case CRON_FOUND:
    return TRUE;
  case CRON_NONE_IN_RANGE:
    return cron_error(error, cron,
                      "it matches no minute before 9999-12-31T23:59Z, the "
                      "last one cron can name");
  case CRON_NONE_IN_FIVE_YEARS:
    break;
  }
  return cron_error(error, cron, "it matches no date in the next five years");
}

/* ---- Schedules ----------------------------------------------------------- */

void
sluice_periodic_options_init(SluicePeriodicOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->missed = SLUICE_MISSED_SKIP;
}

/* The first occurrence strictly after @after_ms (0: none). Schedules live
 * after the epoch (0 means "none" here): earlier times count as 0. */
static gint64
occurrence_after(SluicePeriodic *p, gint64 after_ms)
{
  gint64 next = 0;

  after_ms = MAX(after_ms, 0);
  if (p->interval_ms > 0) {
    gint64 n = after_ms / p->interval_ms + 1;

    return n <= G_MAXINT64 / p->interval_ms ? n * p->interval_ms : 0;
  }
  if (after_ms > CRON_LAST_S * 1000 + 59999 ||
      cron_next(&p->spec, p->tz, after_ms, &next) != CRON_FOUND)
    return 0;
  return next;
}

SluicePeriodic *
sluice_periodic__new(const SluicePeriodicOptions *options,
                     SluiceRegistry *registry, GError **error)
{
  SluicePeriodic *p;
  GError *local = NULL;
  GTimeZone *tz = NULL;
  SluiceTaskOptions task_options;
  CronSpec spec;

  if (options->name == NULL || options->name[0] == '\0') {
    g_set_error_literal(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                        "a periodic schedule needs a name");
    return NULL;
  }
  if (!sluice_task__name_is_valid(options->task, &local)) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s”: %s", options->name, local->message);
    g_error_free(local);
    return NULL;
  }
  if ((options->interval_ms > 0) == (options->cron != NULL)) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s” needs exactly one of interval_ms > 0 "
                "or a cron expression",
                options->name);
    return NULL;
  }
  if (options->interval_ms < 0) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s”: interval_ms cannot be negative",
                options->name);
    return NULL;
  }
  if (options->cron != NULL && !cron_parse(options->cron, &spec, error)) {
    g_prefix_error(error, "periodic schedule “%s”: ", options->name);
    return NULL;
  }
  if (options->timezone != NULL && options->cron == NULL) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s”: a time zone applies to cron "
                "expressions only (an interval is aligned to the epoch, in "
                "no zone); drop the time zone or use a cron expression",
                options->name);
    return NULL;
  }
  if (options->timezone != NULL && (tz = zone_new(options->timezone)) == NULL) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s”: unknown time zone “%s”: use an "
                "IANA name such as Europe/Berlin (the system's tzdata, "
                "/usr/share/zoneinfo) or an offset such as +02:00",
                options->name, options->timezone);
    return NULL;
  }
  if (options->overlap != SLUICE_OVERLAP_ALLOW &&
      options->overlap != SLUICE_OVERLAP_SKIP) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s”: overlap must be "
                "SLUICE_OVERLAP_ALLOW or SLUICE_OVERLAP_SKIP",
                options->name);
    g_clear_pointer(&tz, g_time_zone_unref);
    return NULL;
  }
  /* A skip waits for the previous occurrence's final record. */
  if (options->overlap == SLUICE_OVERLAP_SKIP && registry != NULL &&
      sluice_registry_get_options(registry, options->task, &task_options) &&
      task_options.store_result == SLUICE_OFF) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s”: overlap = skip needs the results "
                "of task “%s” stored, to know when an occurrence finished, "
                "but the task is registered with store_result off",
                options->name, options->task);
    g_clear_pointer(&tz, g_time_zone_unref);
    return NULL;
  }

  p = g_new0(SluicePeriodic, 1);
  p->name = g_strdup(options->name);
  p->task = g_strdup(options->task);
  if (options->queue != NULL) {
    p->queue = g_strdup(options->queue);
  } else {
    p->queue = g_strdup(registry != NULL &&
                                sluice_registry_get_options(
                                    registry, options->task, &task_options) &&
                                task_options.queue != NULL
                            ? task_options.queue
                            : SLUICE_DEFAULT_QUEUE);
  }
  p->args = options->args != NULL ? g_bytes_ref(options->args) : NULL;
  p->interval_ms = options->interval_ms;
  p->cron = g_strdup(options->cron);
  if (p->cron != NULL)
    p->spec = spec;
  p->missed = options->missed;
  p->missed_max =
      options->missed_max > 0 ? options->missed_max : MISSED_MAX_DEFAULT;
  p->tz = tz;
  p->overlap = options->overlap;
  return p;
}

gboolean
sluice_periodic_next_occurrence(const SluicePeriodicOptions *options,
                                gint64 after_ms, gint64 *out_next_ms,
                                GError **error)
{
  SluicePeriodic *p;
  gint64 next;

  g_return_val_if_fail(options != NULL && out_next_ms != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  p = sluice_periodic__new(options, NULL, error);
  if (p == NULL)
    return FALSE;
  next = occurrence_after(p, after_ms);
  sluice_periodic__free(p);
  if (next == 0) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID,
                "periodic schedule “%s” never occurs again (its cron "
                "expression matches no date in the next five years)",
                options->name);
    return FALSE;
  }
  *out_next_ms = next;
  return TRUE;
}

void
sluice_periodic__free(SluicePeriodic *p)
{
  if (p == NULL)
    return;
  g_free(p->name);
  g_free(p->task);
  g_free(p->queue);
  if (p->args != NULL)
    g_bytes_unref(p->args);
  g_free(p->cron);
  if (p->tz != NULL)
    g_time_zone_unref(p->tz);
  sluice_keyring_unref(p->keyring);
  g_free(p);
}

void
sluice_periodic__set_keyring(SluicePeriodic *p, SluiceKeyring *keyring)
{
  sluice_keyring_unref(p->keyring);
  p->keyring = keyring != NULL ? sluice_keyring_ref(keyring) : NULL;
}

const gchar *
sluice_periodic__get_name(SluicePeriodic *p)
{
  return p->name;
}

gint64
sluice_periodic__get_next_due(SluicePeriodic *p)
{
  return p->started ? p->next_due : 0;
}

/* Overlap: sets @out_state to what the previous occurrence (the last one
 * the broker recorded before @at) still is, or to UNKNOWN when it
 * finished or there is none. */
static gboolean
previous_state(SluicePeriodic *p, SluiceBroker *broker, gint64 at,
               gchar **out_id, SluiceTaskState *out_state, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(SluiceResult) record = NULL;
  SluiceTaskLocation loc;
  gint64 last = 0;

  *out_state = SLUICE_STATE_UNKNOWN;
  if (!sluice_broker_last_periodic(broker, p->name, &last, error))
    return FALSE;
  if (last <= 0 || last >= at)
    return TRUE;
  *out_id = g_strdup_printf("periodic:%s:%" G_GINT64_FORMAT, p->name, last);
  if (!sluice_broker_get_record(broker, *out_id, &bytes, error))
    return FALSE;
  if (bytes != NULL && (record = sluice_result_decode(bytes, NULL)) != NULL) {
    if (!sluice_task_state_is_final(sluice_result_get_state(record)))
      *out_state = sluice_result_get_state(record);
    return TRUE;
  }
  /* No record (it expired, or was never written): still on the schedule
   * means it waits for a retry. */
  if (!sluice_broker_lookup_task(broker, *out_id, &loc, error))
    return FALSE;
  if (loc.place == SLUICE_TASK_PLACE_SCHEDULED)
    *out_state = SLUICE_STATE_RETRYING;
  sluice_task_location_clear(&loc);
  return TRUE;
}

/* Enqueues occurrence @at through the broker's compare-and-set, unless
 * the overlap policy skips it. */
static gboolean
dispatch_occurrence(SluicePeriodic *p, SluiceBroker *broker, gint64 at,
                    gint64 now, GError **error)
{
  g_autoptr(SluiceEnvelope) env = sluice_envelope_new();
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GBytes) record = NULL;
  SluiceSubmit submit;
  gboolean claimed = FALSE;

  if (p->overlap == SLUICE_OVERLAP_SKIP) {
    g_autofree gchar *previous = NULL;
    SluiceTaskState state;

    if (!previous_state(p, broker, at, &previous, &state, error))
      return FALSE;
    if (state != SLUICE_STATE_UNKNOWN) {
      sluice_log__message(G_LOG_LEVEL_INFO,
                          "periodic schedule “%s” skipped its occurrence at "
                          "%" G_GINT64_FORMAT ": the previous one (%s) is "
                          "still %s (overlap = skip)",
                          p->name, at, previous,
                          sluice_task_state_to_string(state));
      return TRUE;
    }
  }

  env->id = g_strdup_printf("periodic:%s:%" G_GINT64_FORMAT, p->name, at);
  env->task = g_strdup(p->task);
  env->queue = g_strdup(p->queue);
  if (p->args != NULL) {
    g_bytes_unref(env->args);
    env->args = g_bytes_ref(p->args);
  }
  env->attempt = 1;
  env->enqueued_at = now;
  if (p->keyring != NULL && !sluice_client__seal_args(p->keyring, env, error))
    return FALSE;
  payload = sluice_envelope_encode(NULL, env, error);
  if (payload == NULL)
    return FALSE;

  memset(&submit, 0, sizeof submit);
  submit.id = env->id;
  submit.queue = env->queue;
  submit.payload = payload;
  if (p->overlap == SLUICE_OVERLAP_SKIP) {
    /* What the next occurrence looks at: its worker replaces it. */
    g_autoptr(SluiceResult) r = sluice_result_new(env->id, SLUICE_STATE_QUEUED);
    sluice_result_set_task(r, env->task, env->queue);
    sluice_result_set_times(r, now, 0, 0);
    record = sluice_result_encode(r);
    submit.record = record;
    submit.record_ttl_ms = SLUICE_DEFAULT_RESULT_TTL_MS;
  }
  if (!sluice_broker_claim_periodic(broker, p->name, at, &submit, &claimed,
                                    error))
    return FALSE;
  if (claimed)
    sluice_log__task(
        G_LOG_LEVEL_INFO, env->id, env->task, env->queue, 1,
        "periodic schedule “%s” dispatched its occurrence at %" G_GINT64_FORMAT,
        p->name, at);
  return TRUE;
}

gboolean
sluice_periodic__start(SluicePeriodic *p, SluiceBroker *broker, gint64 now,
                       GError **error)
{
  gint64 last = 0;
  g_autoptr(GArray) missed = NULL;

  if (!sluice_broker_last_periodic(broker, p->name, &last, error))
    return FALSE;

  if (last > 0 && p->missed != SLUICE_MISSED_SKIP) {
    /* Occurrences in (last, now] fell while no scheduler ran. Keep the
     * latest `missed_max` of them (one for ONCE), oldest first. */
    guint keep = p->missed == SLUICE_MISSED_ONCE ? 1 : p->missed_max;
    missed = g_array_new(FALSE, FALSE, sizeof(gint64));
    if (p->interval_ms > 0) {
      gint64 latest = now / p->interval_ms * p->interval_ms;
      for (guint i = 0; i < keep; i++) {
        gint64 at = latest - (gint64)(keep - 1 - i) * p->interval_ms;
        if (at > last)
          g_array_append_val(missed, at);
      }
    } else {
      /* Cron: walk forward, keeping a sliding window. The walk is bounded
       * because cron fires at most once a minute. */
      for (gint64 at = occurrence_after(p, last); at > 0 && at <= now;
           at = occurrence_after(p, at)) {
        g_array_append_val(missed, at);
        if (missed->len > keep)
          g_array_remove_index(missed, 0);
      }
    }
    for (guint i = 0; i < missed->len; i++)
      if (!dispatch_occurrence(p, broker, g_array_index(missed, gint64, i), now,
                               error))
        return FALSE;
  }
  /* The next regular occurrence; one falling exactly now counts. */
  p->next_due = occurrence_after(p, now - 1);
  p->started = TRUE;
  return TRUE;
}

gboolean
sluice_periodic__tick(SluicePeriodic *p, SluiceBroker *broker, gint64 now,
                      GError **error)
{
  guint n = 0;

  if (!p->started && !sluice_periodic__start(p, broker, now, error))
    return FALSE;
  while (p->next_due > 0 && p->next_due <= now) {
    if (n++ == TICK_MAX_OCCURRENCES) {
      /* The worker stalled for many periods: skip ahead instead of
       * flooding the queue (the missed-run policy is for restarts). */
      p->next_due = occurrence_after(p, now);
      break;
    }
    if (!dispatch_occurrence(p, broker, p->next_due, now, error))
      return FALSE;
    p->next_due = occurrence_after(p, p->next_due);
  }
  return TRUE;
}
