'use strict';
// sluice-client: Sluice producers for Node. Enqueue tasks for Sluice's C
// workers, await, inspect and cancel them, list and replay dead letters.
// The bytes written are the C library's (PROTOCOL.md) and the Redis
// scripts run are the files the C broker compiles in (lua/).

const { Client } = require('./lib/client');
const errors = require('./lib/errors');
const protocol = require('./lib/protocol');
const { Keyring } = require('./lib/seal');

module.exports = {
  Client, Keyring, ...errors, protocol, DEAD_LETTER_REASONS: protocol.DEAD_LETTER_REASONS,
};
