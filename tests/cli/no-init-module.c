/* no-init-module.c - a shared object that is not a task module: it lacks
 * sluice_module_init. test-cli.c checks that `sluice worker --module` says
 * so clearly instead of crashing or starting a worker without tasks. */
#include <glib.h>

int sluice_cli_test_not_a_module(void);

int
sluice_cli_test_not_a_module(void)
{
  return 42;
}
