/* test-cli-text.c - the command's text helpers that every log line runs
 * through: times and terminal-safe text.
 *
 * They are written by hand for speed (a worker logs a line per task), so
 * they are checked here against GLib's own formatting and against the
 * escaping rules, over the whole range of times a line can carry.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* What cli_append_time() must write, the slow way. */
static gchar *
expected_time(gint64 ms)
{
  gint64 s = ms / 1000 - (ms % 1000 < 0); /* rounded down, without -ms */
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(s);

  if (dt == NULL)
    return g_strdup_printf("%" G_GINT64_FORMAT " ms", ms);
  /* ISO 8601's four-digit year: GLib's %Y writes year 1 as "1". */
  return g_strdup_printf("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                         g_date_time_get_year(dt), g_date_time_get_month(dt),
                         g_date_time_get_day_of_month(dt),
                         g_date_time_get_hour(dt), g_date_time_get_minute(dt),
                         g_date_time_get_second(dt), (int)(ms - s * 1000));
}

static void
assert_time(gint64 ms)
{
  g_autoptr(GString) got = g_string_new(NULL);
  g_autofree gchar *want = expected_time(ms);

  cli_append_time(got, ms);
  ck_assert_msg(strcmp(got->str, want) == 0, "%" G_GINT64_FORMAT ": %s, not %s",
                ms, got->str, want);
}

START_TEST(test_time_matches_gdatetime)
{
  static const gint64 edges[] = {
      0,
      1,
      -1,
      999,
      -999,
      1000,
      -1000,
      86399999,
      86400000,
      -86400000,
      951782400000,                       /* 2000-02-29 */
      4107456000000,                      /* 2100-02-28 */
      G_GINT64_CONSTANT(-62135596800000), /* 0001-01-01 */
      G_GINT64_CONSTANT(-62135596800001), /* before it */
      G_GINT64_CONSTANT(253402300799999), /* 9999-12-31T23:59:59.999 */
      G_GINT64_CONSTANT(253402300800000), /* 10000-01-01 */
      G_MININT64,
      G_MAXINT64};
  GRand *rand = g_rand_new_with_seed(20261201);

  for (gsize i = 0; i < G_N_ELEMENTS(edges); i++)
    assert_time(edges[i]);
  for (guint i = 0; i < 200000; i++) {
    gdouble span = 253402300800000.0 + 62135596800000.0;
    gint64 ms = (gint64)(g_rand_double(rand) * span) - 62135596800000;
    assert_time(ms);
  }
  g_rand_free(rand);
}
END_TEST

START_TEST(test_terminal_text_escapes)
{
  static const struct {
    const gchar *in, *out;
  } cases[] = {
      {"plain ascii", "plain ascii"},
      {"tab\tand\nnewline\r", "tab and newline "},
      {"esc\x1b[2J bel\x07 del\x7f", "esc\\x1b[2J bel\\x07 del\\x7f"},
      {"csi \xc2\x9b c1", "csi \\u009b c1"},
      {"caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93"},
      {"bad \xff\xfe utf8 \xe2\x82", "bad \\xff\\xfe utf8 \\xe2\\x82"},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree gchar *got = cli_terminal_text(cases[i].in, -1);
    g_autoptr(GString) appended = g_string_new("x");

    ck_assert_str_eq(got, cases[i].out);
    cli_append_terminal_text(appended, cases[i].in, -1);
    ck_assert_str_eq(appended->str + 1, cases[i].out);
  }
}
END_TEST

/* Numbers as Prometheus's clients write them: the shortest text that reads
 * back as the same double. */
START_TEST(test_number_is_shortest)
{
  static const struct {
    gdouble value;
    const gchar *text;
  } cases[] = {
      {2997 / 1e6, "0.002997"}, /* g_ascii_dtostr: 0.0029970000000000001 */
      {0.1, "0.1"},
      {1e-05, "1e-05"},
      {2.0, "2"},
      {0.0, "0"},
      {-1.5, "-1.5"},
      {1.0 / 3.0, "0.3333333333333333"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1893456000.123, "1893456000.123"},
      {1e21, "1e+21"},
      {1234567.0, "1234567"},
      {1e16, "1e+16"},
      {G_MAXDOUBLE, "1.7976931348623157e+308"},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    gchar buf[G_ASCII_DTOSTR_BUF_SIZE];

    ck_assert_str_eq(cli_format_number(buf, cases[i].value), cases[i].text);
    ck_assert(g_ascii_strtod(buf, NULL) == cases[i].value);
  }
}
END_TEST

/* A rate's period: a duration, or Celery's bare unit (10/s, 100/m). */
START_TEST(test_rate_period)
{
  static const struct {
    const gchar *text;
    gint64 ms;
  } good[] = {{"s", 1000},  {"m", 60000},   {"h", 3600000}, {"ms", 1},
              {"1s", 1000}, {"10s", 10000}, {"250ms", 250}, {"5m", 300000}};
  static const gchar *const bad[] = {"",   "x",   "1",   "sec",
                                     "/s", "1 s", "-1s", "1.5s"};

  for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
    g_autoptr(GError) error = NULL;
    gint64 ms = -1;

    ck_assert_msg(
        cli_parse_rate_period("--rate-limit", good[i].text, &ms, &error),
        "%s: %s", good[i].text, error->message);
    ck_assert_int_eq(ms, good[i].ms);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    gint64 ms = -1;

    ck_assert_msg(!cli_parse_rate_period("--rate-limit", bad[i], &ms, &error),
                  "“%s” accepted", bad[i]);
    ck_assert(g_error_matches(error, CLI_ERROR, CLI_ERROR_USAGE));
    ck_assert_msg(strstr(error->message, "--rate-limit") != NULL &&
                      strstr(error->message, "10/s") != NULL,
                  "%s", error->message);
  }
}
END_TEST

/* A settings table's rule: the option, else the environment, else the key
 * file, else the default; --help says the default; a row's value is
 * checked by its type and the message names where it came from. */
typedef struct {
  guint n;
  gboolean on;
  gchar **list;
} Target;

START_TEST(test_settings_table_precedence)
{
  static const CliSetting rows[] = {
      {.option = "count",
       .env = "CLI_TEXT_TEST_COUNT",
       .key = "count",
       .kind = CLI_SETTING_TEXT,
       .type = &cli_setting_count,
       .offset = G_STRUCT_OFFSET(Target, n),
       .min = 1,
       .max = 9,
       .arg = "N",
       .help = "A count"},
      {.option = "no-on",
       .key = "on",
       .kind = CLI_SETTING_OFF_FLAG,
       .type = &cli_setting_boolean,
       .offset = G_STRUCT_OFFSET(Target, on),
       .help = "Off"},
      {.option = "item",
       .key = "items",
       .kind = CLI_SETTING_LIST,
       .type = &cli_setting_strv,
       .offset = G_STRUCT_OFFSET(Target, list),
       .help = "An item"},
  };
  const Target defaults = {.n = 4, .on = TRUE};
  CliSettings settings = {0};
  g_autoptr(GKeyFile) keyfile = g_key_file_new();
  g_autofree const gchar **keys = cli_setting_keys(rows, G_N_ELEMENTS(rows));

  ck_assert(g_key_file_load_from_data(keyfile,
                                      "[t]\ncount=7\non=false\nitems=a;b;\n",
                                      -1, G_KEY_FILE_NONE, NULL));
  settings.keyfile = keyfile;
  settings.config_path = (gchar *)"t.conf";
  ck_assert_uint_eq(g_strv_length((gchar **)keys), 3);
  ck_assert_str_eq(keys[2], "items");
  for (guint round = 0; round < 4; round++) {
    CliSettingArgs args = {0};
    g_autofree GOptionEntry *entries =
        cli_setting_entries(&args, rows, G_N_ELEMENTS(rows), 0, &defaults);
    g_autoptr(GOptionContext) context = g_option_context_new(NULL);
    const gchar *argv0[] = {"t",      "--count", "3", "--no-on",
                            "--item", "z",       NULL};
    /* Parsing takes what it reads out of argv without freeing it: the
     * strings are freed through a copy of the array. */
    gchar **owned = g_strdupv((gchar **)argv0);
    gchar **argv = g_memdup2(owned, sizeof argv0);
    gint argc = round == 0 ? 6 : 1;
    Target t = defaults;
    g_autoptr(GError) error = NULL;

    ck_assert_str_eq(entries[0].description, "A count (default 4)");
    ck_assert_str_eq(entries[1].description, "Off");
    g_option_context_add_main_entries(context, entries, NULL);
    ck_assert(g_option_context_parse(context, &argc, &argv, NULL));
    if (round == 1)
      g_setenv("CLI_TEXT_TEST_COUNT", "5", TRUE);
    else
      g_unsetenv("CLI_TEXT_TEST_COUNT");
    if (round == 3)
      g_setenv("CLI_TEXT_TEST_COUNT", "10", TRUE);
    if (round == 3) {
      ck_assert(!cli_settings_apply(&args, 0, &settings, "t", &t, &error));
      ck_assert_msg(strstr(error->message, "CLI_TEXT_TEST_COUNT") != NULL, "%s",
                    error->message);
    } else {
      ck_assert_msg(cli_settings_apply(&args, 0, round == 2 ? NULL : &settings,
                                       "t", &t, &error),
                    "%s", error != NULL ? error->message : "");
      ck_assert_uint_eq(t.n, round == 0 ? 3 : round == 1 ? 5 : 4);
      ck_assert(t.on == (round == 2));
      if (round == 2)
        ck_assert_ptr_null(t.list);
      else
        ck_assert_str_eq(t.list[0], round == 0 ? "z" : "a");
    }
    g_unsetenv("CLI_TEXT_TEST_COUNT");
    g_strfreev(t.list);
    g_free(argv);
    g_strfreev(owned);
    cli_setting_args_clear(&args);
  }
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("cli-text");
  TCase *tc = tcase_create("text");
  SRunner *sr;
  int failed;

  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_time_matches_gdatetime);
  tcase_add_test(tc, test_terminal_text_escapes);
  tcase_add_test(tc, test_rate_period);
  tcase_add_test(tc, test_number_is_shortest);
  tcase_add_test(tc, test_settings_table_precedence);
  suite_add_tcase(s, tc);
  sr = srunner_create(s);
  srunner_run_all(sr, CK_ENV);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
