/* mail-task.h - the task under test in examples/testing. */
#pragma once

#include <sluice/sluice.h>

typedef struct _MailTransport MailTransport;

struct _MailTransport {
  /* Sends one mail; FALSE with @error when the service refuses. */
  gboolean (*send)(MailTransport *self, const gchar *message_id,
                   const gchar *to, const gchar *subject, GError **error);
};

/* The task "mail.send_welcome": args {"to": "someone@example.org"};
 * user_data is the MailTransport. */
gboolean mail_send_welcome(SluiceTaskContext *ctx, gpointer user_data,
                           GError **error);
