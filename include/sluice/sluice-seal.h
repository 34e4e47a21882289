/* sluice-seal.h - task arguments and results encrypted at rest.
 *
 * Whoever can read the broker's store (a Redis replica, a backup, the
 * SQLite file, a support engineer) reads every task's arguments and
 * results. A keyring closes that: a client given one seals the args of
 * every message it sends (AES-256-GCM, the task's id, name and queue bound
 * as associated data, so a ciphertext moved to another task fails to
 * open), and a worker given one opens them for the task and seals the
 * task's result the same way. Names, queues, ids, timings and headers stay
 * readable: routing, the dashboard and the operator's commands need them.
 *
 * A keyring is a file of named 256-bit keys, one of them current: the
 * current key seals, every key opens, so rotating is adding a key and
 * making it current while the old ones stay until nothing sealed with them
 * waits (docs/security.md, "Encryption at rest"). The file format is
 * PROTOCOL.md's "Keyrings", the same for the C, Python and Node clients.
 */
#pragma once

#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

/**
 * SluiceSealError:
 * @SLUICE_SEAL_ERROR_KEYRING: the keyring file cannot be read or is not
 *   one (the message names the file, the line and the fix)
 * @SLUICE_SEAL_ERROR_UNKNOWN_KEY: sealed with a key the keyring lacks, or
 *   with an algorithm this build does not know
 * @SLUICE_SEAL_ERROR_AUTHENTICATION: the ciphertext, or the task it claims
 *   to belong to, was changed: it does not open
 * @SLUICE_SEAL_ERROR_FAILED: the system's cryptography failed (no
 *   randomness, out of memory)
 */
typedef enum {
  SLUICE_SEAL_ERROR_KEYRING,
  SLUICE_SEAL_ERROR_UNKNOWN_KEY,
  SLUICE_SEAL_ERROR_AUTHENTICATION,
  SLUICE_SEAL_ERROR_FAILED,
} SluiceSealError;

#define SLUICE_SEAL_ERROR (sluice_seal_error_quark())
SLUICE_AVAILABLE_IN_0_1
GQuark sluice_seal_error_quark(void);

/* The algorithm Sluice seals with, as a message's `seal` names it. */
#define SLUICE_SEAL_ALGORITHM "aes-256-gcm"

typedef struct _SluiceKeyring SluiceKeyring;

/**
 * sluice_keyring_load:
 * @path: (type filename): the keyring file
 *
 * Reads and checks the whole file. A file that others than its owner can
 * read or write is refused (chmod 600), unless it lies under
 * $CREDENTIALS_DIRECTORY (systemd's LoadCredential=, which makes it
 * readable by the service only).
 * Returns: (transfer full): the keyring, or NULL and @error
 *   (SLUICE_SEAL_ERROR_KEYRING). No message quotes key material.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceKeyring *sluice_keyring_load(const gchar *path, GError **error);

/**
 * sluice_keyring_new_from_text:
 * @text: (array length=len): a keyring in the file format
 * @len: its length, or -1 if @text ends with a NUL
 * @origin: what to call it in an error message, e.g. a file name
 *
 * The same as sluice_keyring_load() for a keyring held in memory (a test,
 * a secret manager's answer). @text may be wiped by the caller afterwards.
 * Returns: (transfer full): the keyring, or NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceKeyring *sluice_keyring_new_from_text(const gchar *text, gssize len,
                                            const gchar *origin,
                                            GError **error);

/** sluice_keyring_ref: Returns: (transfer full): @keyring. Thread-safe. */
SLUICE_AVAILABLE_IN_0_1
SluiceKeyring *sluice_keyring_ref(SluiceKeyring *keyring);

/**
 * sluice_keyring_unref:
 * @keyring: (nullable) (transfer full)
 *
 * The last reference wipes the keys from memory.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_keyring_unref(SluiceKeyring *keyring);

/** sluice_keyring_get_current: Returns: (transfer none): the id of the
 * key that seals. */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_keyring_get_current(const SluiceKeyring *keyring);

/** sluice_keyring_has_key: Returns: TRUE if @keyring holds key @id. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_keyring_has_key(const SluiceKeyring *keyring, const gchar *id);

/**
 * sluice_keyring_file_add_key:
 * @path: (type filename): the keyring file; made (mode 0600) if absent
 * @id: (nullable): the new key's id; NULL = one from the time, such as
 *   "20261202-131501"
 * @out_id: (out) (optional) (transfer full): the id given
 *
 * Adds a new random key to the file and makes it current, the step of a
 * rotation: from then on a program that loads the file seals with the new
 * key and still opens with the old ones. The file is replaced atomically
 * (a program reading it meanwhile sees the old or the new one), its other
 * lines kept.
 * Returns: TRUE, or FALSE and @error (the id is taken or invalid, the
 *   file is not a keyring, it cannot be written).
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_keyring_file_add_key(const gchar *path, const gchar *id,
                                     gchar **out_id, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceKeyring, sluice_keyring_unref)

G_END_DECLS
