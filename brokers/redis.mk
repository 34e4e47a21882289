# The Redis brokers: a shared layer (brokers/redis/) and one file per queue
# transport. A new transport adds its file here and one line to the mode
# table in brokers/redis/redis-broker.c.
libsluice_internal_la_SOURCES += \
	brokers/redis/redis-conn.h \
	brokers/redis/redis-conn.c \
	brokers/redis/redis-keys.h \
	brokers/redis/redis-keys.c \
	brokers/redis/redis-scripts.h \
	brokers/redis/redis-scripts.c \
	brokers/redis/redis-transport.h \
	brokers/redis/redis-broker.h \
	brokers/redis/redis-broker.c \
	brokers/redis-fast/fast-transport.c \
	brokers/redis-reliable/reliable-transport.h \
	brokers/redis-reliable/reliable-transport.c
