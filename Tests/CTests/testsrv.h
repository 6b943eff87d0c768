/*
 * testsrv.h — access to the test servers from C integration tests.
 *
 * The servers (nginx and Tests/TestServer/faultserver.py) are started by
 * `Tests/TestServer/servers.py start STATE_DIR`, which writes STATE_DIR/env as KEY=VALUE lines
 * (NGINX_PORT, NGINX_SHORT_PORT, FAULT_PORT, WWW, SHA_EMPTY, SHA_1K, SHA_64K, SHA_100M, ...).
 * A test finds that directory through the environment variable TERN_TEST_STATE. There is no
 * skipping: when TERN_TEST_STATE is unset or the env file is missing, the test aborts with a
 * message saying so.
 *
 * Thread-safe: the env file is read once, on first use, under pthread_once.
 * Link with libcrypto (-lcrypto) for the SHA-256 helpers.
 */
#ifndef TERN_TEST_TESTSRV_H
#define TERN_TEST_TESTSRV_H

#include <stddef.h>
#include <stdint.h>

/* The value of KEY in the env file, or NULL when the file has no such key. The string lives as
 * long as the process. Aborts when TERN_TEST_STATE is unset or its env file cannot be read. */
const char *testsrv_get(const char *key);

/* A port from the env file, e.g. testsrv_port("NGINX_PORT"). Aborts when the key is missing or
 * not a port number. */
int testsrv_port(const char *key);

/* malloc'd "http://127.0.0.1:PORT/path" (a missing leading '/' in path is added); free() it.
 * Aborts like testsrv_port, or when out of memory. */
char *testsrv_url(const char *portkey, const char *path);

/* Whether nginx listens on [::1] too (NGINX_IPV6=1): IPv6 cases run only where the host has it. */
int testsrv_has_ipv6(void);

/* malloc'd "WWW/name": the path of a fixture file in nginx's docroot; free() it. */
char *testsrv_www_path(const char *name);

/* SHA-256 of a file's contents as 64 lower-case hex digits plus NUL. Returns 0, or -1 with
 * errno set when the file cannot be read. */
int testsrv_sha256_file(const char *path, char hex[65]);

/* SHA-256 of n bytes at p (p may be NULL when n is 0). */
void testsrv_sha256_mem(const void *p, size_t n, char hex[65]);

/* The fault server's body pattern: byte i of every generated body (/ok, /truncate, /stall,
 * /headlen, ...) is i % 251. Fills buf with n pattern bytes starting at body offset `offset`. */
#define TESTSRV_PATTERN_MOD 251
void testsrv_pattern_fill(void *buf, size_t n, uint64_t offset);

/* SHA-256 of the first n bytes of the fault server's body pattern (streamed; any n). */
void testsrv_pattern_sha256(uint64_t n, char hex[65]);

#endif /* TERN_TEST_TESTSRV_H */
