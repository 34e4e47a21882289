/* sluice-module.h - task modules: shared objects that register tasks.
 *
 * `sluice worker --module PATH.so` (and any program using GModule) loads a
 * module and calls its entry point once with the worker's registry:
 *
 *     #include <sluice/sluice.h>
 *
 *     SLUICE_MODULE_EXPORT gboolean
 *     sluice_module_init (SluiceRegistry *registry, GError **error)
 *     {
 *       return sluice_registry_add (registry, "mail.send", mail_send,
 *                                   NULL, NULL, NULL, error);
 *     }
 *
 * Build it as a shared object linked against sluice (pkg-config --cflags
 * --libs sluice) with -shared -fPIC. A module stays loaded for the life of
 * the process: a task that ignored its cancellable may still be running
 * its code after the worker stopped.
 */
#pragma once

#include <sluice/sluice-macros.h>
#include <sluice/sluice-task.h>

G_BEGIN_DECLS

/* The name the loader looks up. */
#define SLUICE_MODULE_INIT_SYMBOL "sluice_module_init"

/* Gives the entry point default visibility even under -fvisibility=hidden. */
#if defined(__GNUC__)
#define SLUICE_MODULE_EXPORT __attribute__((visibility("default")))
#else
#define SLUICE_MODULE_EXPORT
#endif

/**
 * SluiceModuleInitFunc:
 * @registry: (transfer none): register the module's tasks here
 * @error: set it when returning FALSE
 *
 * Returns: TRUE, or FALSE with @error set (the loader then refuses to
 * start and prints the error, naming the module).
 */
typedef gboolean (*SluiceModuleInitFunc)(SluiceRegistry *registry,
                                         GError **error);

/* Every module defines this; declared here so the definition is checked
 * against the type the loader expects. */
SLUICE_MODULE_EXPORT gboolean sluice_module_init(SluiceRegistry *registry,
                                                 GError **error);

G_END_DECLS
