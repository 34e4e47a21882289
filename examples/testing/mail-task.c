/* mail-task.c - a task function worth testing: sends a welcome mail.
 *
 * It talks to a mail service through a small interface (MailTransport) so
 * a test can swap in a fake one. A refused connection is worth retrying; a
 * malformed address never gets better, so it fails without retry.
 */
#include <string.h>

#include "mail-task.h"

/* Reads the "to" field of a msgpack map into a new string, or NULL. */
static gchar *
arg_to(const msgpack_object *args)
{
  if (args->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (guint32 i = 0; i < args->via.map.size; i++) {
    const msgpack_object_kv *kv = &args->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 2 &&
        memcmp(kv->key.via.str.ptr, "to", 2) == 0 &&
        kv->val.type == MSGPACK_OBJECT_STR)
      return g_strndup(kv->val.via.str.ptr, kv->val.via.str.size);
  }
  return NULL;
}

gboolean
mail_send_welcome(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  MailTransport *transport = user_data;
  g_autofree gchar *to = arg_to(sluice_task_context_get_args(ctx));

  if (to == NULL || strchr(to, '@') == NULL)
    return sluice_task_context_fail(ctx, error, "not a mail address: %s",
                                    to != NULL ? to : "(none)");
  /* The task id is the idempotency key: a retried task does not mail twice
   * if the service remembers ids it has seen. */
  return transport->send(transport, sluice_task_context_get_id(ctx), to,
                         "Welcome!", error);
}
