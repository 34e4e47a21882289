/* redis-lua.c - the arrays declared in redis-lua.h, generated at build
 * time from brokers/redis/lua/ (see embed.sh there). */
#include "config.h"

#include "brokers/redis/redis-lua.h"

#include "brokers/redis/redis-lua-files.inc"
