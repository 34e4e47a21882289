/* alloc-counter.c - counts the bytes a test process has allocated, so that
 * a test can assert what one operation costs at its peak (see
 * alloc-counter.h).
 *
 * Without AddressSanitizer this file replaces malloc and its family, as
 * glibc allows a program to (the "Replacing malloc" section of its
 * manual): each function calls glibc's own allocator (__libc_malloc, ...)
 * and adds the block's usable size to the count, or subtracts it on free.
 * Every allocation of the process goes through it, GLib's and msgpack-c's
 * included. Under AddressSanitizer, which owns malloc, the sanitizer's own
 * hooks count instead.
 *
 * GLib's slice allocator would hide small allocations in its own
 * magazines: the test program runs with G_SLICE=always-malloc (see
 * sluice_test_alloc_require_plain_malloc()).
 */
#include "config.h"

#include "tests/helpers/alloc-counter.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gint64 current_bytes;
static gint64 peak_bytes;

static void
count_add(gint64 n)
{
  gint64 now = __atomic_add_fetch(&current_bytes, n, __ATOMIC_RELAXED);
  gint64 peak = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);

  while (now > peak &&
         !__atomic_compare_exchange_n(&peak_bytes, &peak, now, TRUE,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
}

static void
count_sub(gint64 n)
{
  __atomic_sub_fetch(&current_bytes, n, __ATOMIC_RELAXED);
}

#if defined(__SANITIZE_ADDRESS__)

/* From compiler-rt's sanitizer/allocator_interface.h, which GCC does not
 * ship; its libasan has them. */
int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void *, size_t),
    void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

static void
on_malloc(const volatile void *ptr, size_t size)
{
  count_add((gint64)size);
}

static void
on_free(const volatile void *ptr)
{
  if (ptr != NULL)
    count_sub((gint64)__sanitizer_get_allocated_size((const void *)ptr));
}

gboolean
sluice_test_alloc_start(void)
{
  return __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}

#else

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *ptr, size_t size);
void __libc_free(void *ptr);
void *__libc_memalign(size_t alignment, size_t size);

static void *
counted(void *p)
{
  if (p != NULL)
    count_add((gint64)malloc_usable_size(p));
  return p;
}

void *
malloc(size_t size)
{
  return counted(__libc_malloc(size));
}

void *
calloc(size_t n, size_t size)
{
  return counted(__libc_calloc(n, size));
}

void
free(void *ptr)
{
  if (ptr == NULL)
    return;
  count_sub((gint64)malloc_usable_size(ptr));
  __libc_free(ptr);
}

void *
realloc(void *ptr, size_t size)
{
  gint64 old = ptr != NULL ? (gint64)malloc_usable_size(ptr) : 0;
  void *p;

  /* Count the new block before the old one goes: a realloc that moves
   * holds both for a moment, and that is the peak. */
  if (ptr != NULL && size == 0) {
    free(ptr);
    return NULL;
  }
  p = __libc_realloc(ptr, size);
  if (p == NULL)
    return NULL;
  if (p != ptr) {
    count_add((gint64)malloc_usable_size(p));
    count_sub(old);
  } else {
    count_add((gint64)malloc_usable_size(p) - old);
  }
  return p;
}

void *
memalign(size_t alignment, size_t size)
{
  return counted(__libc_memalign(alignment, size));
}

void *
aligned_alloc(size_t alignment, size_t size)
{
  return counted(__libc_memalign(alignment, size));
}

int
posix_memalign(void **out, size_t alignment, size_t size)
{
  void *p = counted(__libc_memalign(alignment, size));

  if (p == NULL)
    return 12; /* ENOMEM */
  *out = p;
  return 0;
}

void *
valloc(size_t size)
{
  return counted(__libc_memalign((size_t)sysconf(_SC_PAGESIZE), size));
}

void *
pvalloc(size_t size)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);

  return counted(__libc_memalign(page, (size + page - 1) / page * page));
}

gboolean
sluice_test_alloc_start(void)
{
  /* The replacements above count from the first allocation on. */
  return TRUE;
}

#endif

gint64
sluice_test_alloc_current(void)
{
  return __atomic_load_n(&current_bytes, __ATOMIC_RELAXED);
}

void
sluice_test_alloc_reset_peak(void)
{
  __atomic_store_n(&peak_bytes,
                   __atomic_load_n(&current_bytes, __ATOMIC_RELAXED),
                   __ATOMIC_RELAXED);
}

gint64
sluice_test_alloc_peak(void)
{
  return __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
}

void
sluice_test_alloc_require_plain_malloc(char **argv)
{
  if (g_strcmp0(g_getenv("G_SLICE"), "always-malloc") == 0)
    return;
  /* GLib reads G_SLICE when it is loaded, before main(): start again. */
  g_setenv("G_SLICE", "always-malloc", TRUE);
  execv("/proc/self/exe", argv);
  g_error("cannot re-execute the test with G_SLICE=always-malloc: %s",
          g_strerror(errno));
}
