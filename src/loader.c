/* loader.c - dlopen() and dlsym() interposed, for hosts that bind libcurl privately.
 *
 * Two kinds of host never call the preloaded curl_* functions (issue 14):
 *   - PHP dlopens its extensions with RTLD_DEEPBIND|RTLD_GLOBAL|RTLD_LAZY (0x109, php-src
 *     Zend/zend_portability.h DL_LOAD): a deep-bound object looks symbols up in its own
 *     dependency scope before the global one (dlopen(3), RTLD_DEEPBIND), so curl.so binds
 *     curl_easy_perform to libcurl's own CURL_OPENSSL_4 definition, never to ours.
 *   - FFI bindings (Python ctypes, Ruby ffi/Ethon, LuaJIT ...) dlopen("libcurl.so.4")
 *     and dlsym(handle, "curl_easy_perform"): a lookup in a handle searches that object's
 *     own dependency list (glibc elf/dl-sym.c, l_local_scope), where we are not.
 * So, with CURLGUARD on (never when it is off: then both calls go to glibc untouched):
 *   - dlopen without RTLD_DEEPBIND when the object opened needs a libcurl (a DT_NEEDED
 *     entry libcurl*.so*): it then binds as any other library does, global scope first,
 *     and reaches the guard.  Other objects keep their RTLD_DEEPBIND (PHP's other
 *     extensions load exactly as before).  VirtualGL's faker strips the flag the same way.
 *   - dlsym(handle, "curl_...") that finds a function of a libcurl gets the guard's entry
 *     point of that name instead, when the guard exports one.  The handle-less entry
 *     points (curl_easy_init, curl_multi_init) get a trampoline per libcurl, so the guard
 *     knows which libcurl the host asked for even when it was opened RTLD_LOCAL (ctypes,
 *     ruby-ffi): lib.c resolves the trampoline's call site through dlsym(RTLD_NEXT, ...),
 *     which this file answers with that libcurl's functions (see cg__dlsym_decide).
 *
 * glibc's dlopen and dlsym look at their caller's address: dlopen searches the caller's
 * DT_RPATH/DT_RUNPATH and picks its link namespace, dlsym(RTLD_NEXT) means "after the
 * caller's object" (dlopen(3), dlsym(3); elf/dl-open.c, elf/dl-sym.c take
 * RETURN_ADDRESS(0)).  A C wrapper would make libcurlguard the caller of every dlopen of
 * the process, so the entry points are a few instructions of assembly that end in a jump
 * to glibc's function with the host's return address still on the stack: glibc sees the
 * host as the caller, exactly as without us.  Only x86-64 (the Debian amd64 target) has
 * them; elsewhere the library does not interpose dlopen/dlsym at all.
 *
 * The libcurl a substituted dlsym came from is pinned (dlopen RTLD_NOLOAD): lib.c keeps
 * pointers into it for the life of the process, so a host that dlcloses and dlopens it
 * again gets the same mapping back (no new copy, no stale pointers).
 */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "config.h"
#include "lib.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__ELF__)

#define CG_HIDDEN __attribute__((visibility("hidden"), used))
/* The paths every dlopen/dlsym of the process takes (including ASan's and TSan's own
 * lookups of their "real" functions, made before their runtimes work: an instrumented
 * access there crashed cghost under `make check-tsan`) touch no instrumented code and no
 * intercepted libc function. */
#define CG_PLAIN __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined))

/* glibc's own functions, found once (lazily: a host may dlopen before our constructors). */
CG_HIDDEN void *cg__real_dlopen;
CG_HIDDEN void *cg__real_dlsym;
/* The address cg__dlsym_decide returns for "let glibc answer this call". */
CG_HIDDEN char cg__dlsym_forward;

static int cg__self_marker;

CG_PLAIN static void cg__real_init(void) {
  /* dlvsym is not interposed; RTLD_NEXT from here is the object after libcurlguard.so
   * (libc.so.6 itself, or another interposer that comes later). */
  void *o = __atomic_load_n(&cg__real_dlopen, __ATOMIC_ACQUIRE);
  void *s = __atomic_load_n(&cg__real_dlsym, __ATOMIC_ACQUIRE);
  if (o && s)
    return;
  o = dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34");
  if (!o)
    o = dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5");
  s = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!s)
    s = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (!o || !s)
    abort(); /* no dynamic loader to forward to: nothing sensible can run */
  __atomic_store_n(&cg__real_dlopen, o, __ATOMIC_RELEASE);
  __atomic_store_n(&cg__real_dlsym, s, __ATOMIC_RELEASE);
}

static void *cg__rdlsym(void *handle, const char *name) {
  void *(*f)(void *, const char *);
  cg__real_init();
  *(void **) &f = cg__real_dlsym;
  return f(handle, name);
}

static void *cg__rdlopen(const char *file, int mode) {
  void *(*f)(const char *, int);
  cg__real_init();
  *(void **) &f = cg__real_dlopen;
  return f(file, mode);
}

/* ------------------------------------------------------------------ objects */

static const char *cg__basename(const char *p) {
  const char *s = p ? strrchr(p, '/') : NULL;
  return s ? s + 1 : p ? p : "";
}

/* A libcurl by name: libcurl.so.4, libcurl-gnutls.so.4, libcurl-nss.so.4, libcurl.so. */
static int cg__is_curl_name(const char *n) {
  return n && strncmp(n, "libcurl", 7) == 0 && strncmp(n, "libcurlguard", 12) != 0 &&
         (n[7] == '.' || n[7] == '-') && strstr(n, ".so") != NULL;
}

/* Whether the object at `lm` is a copy of libcurlguard (by SONAME or file name). */
static int cg__lm_is_guard(const struct link_map *lm) {
  const char *so = cg_lib_soname(lm);
  if (so && strcmp(so, "libcurlguard.so") == 0)
    return 1;
  return lm && strncmp(cg__basename(lm->l_name), "libcurlguard", 12) == 0;
}

/* The link map of the object containing `addr`, or NULL. */
static struct link_map *cg__lm_of(const void *addr) {
  struct link_map *lm = NULL;
  Dl_info info;
  if (!addr || !dladdr1(addr, &info, (void **) &lm, RTLD_DL_LINKMAP))
    return NULL;
  return lm;
}

static const void *cg__self_base(void) {
  static const void *base;
  const void *b = __atomic_load_n(&base, __ATOMIC_ACQUIRE);
  Dl_info info;
  if (!b && dladdr(&cg__self_marker, &info)) {
    b = info.dli_fbase;
    __atomic_store_n(&base, b, __ATOMIC_RELEASE);
  }
  return b;
}

/* ------------------------------------------------------------------ ELF files */

/* Whether the ELF file `fd` lists a libcurl among its DT_NEEDED entries.  Reads the
 * program headers, PT_DYNAMIC and the dynamic string table (located through the PT_LOAD
 * segment holding DT_STRTAB's address).  0 for anything it cannot read. */
static int cg__fd_needs_curl(int fd) {
  ElfW(Ehdr) eh;
  ElfW(Phdr) ph[64];
  ElfW(Dyn) dyn[512];
  ElfW(Off) dyn_off = 0;
  size_t dyn_size = 0, ndyn, i;
  ElfW(Addr) strtab = 0;
  ElfW(Off) str_off = 0;
  int n, found = 0;

  if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t) sizeof(eh) ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0)
    return 0;
  n = eh.e_phnum < 64 ? eh.e_phnum : 64;
  if (pread(fd, ph, (size_t) n * sizeof(ph[0]), (off_t) eh.e_phoff) !=
      (ssize_t) ((size_t) n * sizeof(ph[0])))
    return 0;
  for (i = 0; i < (size_t) n; i++)
    if (ph[i].p_type == PT_DYNAMIC) {
      dyn_off = ph[i].p_offset;
      dyn_size = ph[i].p_filesz;
    }
  if (dyn_size == 0)
    return 0;
  if (dyn_size > sizeof(dyn))
    dyn_size = sizeof(dyn);
  if (pread(fd, dyn, dyn_size, (off_t) dyn_off) != (ssize_t) dyn_size)
    return 0;
  ndyn = dyn_size / sizeof(dyn[0]);
  for (i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++)
    if (dyn[i].d_tag == DT_STRTAB)
      strtab = dyn[i].d_un.d_ptr;
  for (i = 0; i < (size_t) n; i++)
    if (ph[i].p_type == PT_LOAD && strtab >= ph[i].p_vaddr &&
        strtab < ph[i].p_vaddr + ph[i].p_filesz) {
      str_off = ph[i].p_offset + (strtab - ph[i].p_vaddr);
      break;
    }
  if (i == (size_t) n)
    return 0;
  for (i = 0; i < ndyn && dyn[i].d_tag != DT_NULL && !found; i++) {
    char name[64];
    ssize_t got;
    if (dyn[i].d_tag != DT_NEEDED)
      continue;
    got = pread(fd, name, sizeof(name) - 1, (off_t) (str_off + dyn[i].d_un.d_val));
    if (got <= 0)
      continue;
    name[got] = '\0';
    found = cg__is_curl_name(name);
  }
  return found;
}

static int cg__path_needs_curl(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int r;
  if (fd < 0)
    return -1;
  r = cg__fd_needs_curl(fd);
  close(fd);
  return r;
}

/* Whether the object dlopen(`file`) would load needs a libcurl.  A name with a slash is
 * that file (ld.so(8)); a bare name is looked for where ld.so looks first for it:
 * LD_LIBRARY_PATH, then the multiarch and plain system directories (ld.so.cache holds
 * those same directories on Debian).  A file not found: no. */
static int cg__needs_curl(const char *file) {
  static const char *const dirs[] = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                     "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
  char path[PATH_MAX];
  const char *llp;
  size_t i;
  int r;

  if (strchr(file, '/'))
    return cg__path_needs_curl(file) == 1;
  llp = getenv("LD_LIBRARY_PATH");
  while (llp && *llp) {
    size_t len = strcspn(llp, ":;");
    if (len > 0 && len < sizeof(path) - strlen(file) - 2) {
      snprintf(path, sizeof(path), "%.*s/%s", (int) len, llp, file);
      if ((r = cg__path_needs_curl(path)) >= 0)
        return r == 1;
    }
    llp += len;
    if (*llp)
      llp++;
  }
  for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", dirs[i], file);
    if ((r = cg__path_needs_curl(path)) >= 0)
      return r == 1;
  }
  return 0;
}

/* Guarding is on and this copy is the one that guards. */
static int cg__active(void) {
  return cg_config_enabled() && !cg_lib_is_duplicate();
}

/* The mode glibc's dlopen gets: `mode` without RTLD_DEEPBIND when the guard is on and
 * `file` needs a libcurl; `mode` itself otherwise (always when CURLGUARD is off). */
static int cg__dlopen_mode_deep(const char *file, int mode) {
  if (!file || !cg__active())
    return mode;
  return cg__needs_curl(file) ? (mode & ~RTLD_DEEPBIND) : mode;
}

CG_HIDDEN CG_PLAIN int cg__dlopen_mode(const char *file, int mode) {
  cg__real_init();
  return (mode & RTLD_DEEPBIND) ? cg__dlopen_mode_deep(file, mode) : mode;
}

/* ------------------------------------------------------------------ libcurls seen */

#define CG_LOADER_LIBS 8

/* A libcurl a host got a substituted symbol of: its load address and a pinning handle. */
struct cg__seen {
  const void *base;
  void *handle;
};

static pthread_mutex_t cg__seen_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct cg__seen cg__seen[CG_LOADER_LIBS];
static int cg__nseen;    /* entries published; read with acquire */
static int cg__last = -1; /* the libcurl last handed out, for callers lib.c cannot place */
/* Inside trampoline k (below): lib.c's lookups of this thread are answered from cg__seen[k]. */
static __thread int cg__pending = -1;

/* The slot of the libcurl `lm`, registering (and pinning) it on first sight; -1 when full. */
static int cg__seen_slot(struct link_map *lm) {
  void *pin;
  int i, n = __atomic_load_n(&cg__nseen, __ATOMIC_ACQUIRE);

  for (i = 0; i < n; i++)
    if (cg__seen[i].base == (const void *) lm->l_addr)
      return i;
  /* Outside the mutex: dlopen takes glibc's loader lock, and a constructor running under
   * that lock may call dlsym and come here. */
  pin = cg__rdlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!pin)
    return -1;
  pthread_mutex_lock(&cg__seen_mutex);
  n = cg__nseen;
  for (i = 0; i < n; i++)
    if (cg__seen[i].base == (const void *) lm->l_addr)
      break;
  if (i == n && n < CG_LOADER_LIBS) {
    cg__seen[n].base = (const void *) lm->l_addr;
    cg__seen[n].handle = pin;
    pin = NULL;
    __atomic_store_n(&cg__nseen, n + 1, __ATOMIC_RELEASE);
  } else if (i == n) {
    i = -1;
  }
  pthread_mutex_unlock(&cg__seen_mutex);
  if (pin)
    dlclose(pin);
  return i;
}

/* The guard's own definition of `name` (shim.c's entry points), or NULL. */
static void *cg__ours(const char *name) {
  static void *self;
  void *h = __atomic_load_n(&self, __ATOMIC_ACQUIRE);
  void *p;
  Dl_info info;

  if (!h) {
    if (!dladdr(&cg__self_marker, &info) || !info.dli_fname)
      return NULL;
    h = cg__rdlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
      return NULL;
    if (!__atomic_compare_exchange_n(&self, &(void *){NULL}, h, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
      dlclose(h);
      h = __atomic_load_n(&self, __ATOMIC_ACQUIRE);
    }
  }
  p = cg__rdlsym(h, name);
  return p && dladdr(p, &info) && info.dli_fbase == cg__self_base() ? p : NULL;
}

/* Trampolines for the entry points that take no handle: one per libcurl slot, each a call
 * site of its own, so lib.c's call-site cache keeps them apart (hence always inlined: the
 * call instruction must lie in each trampoline, not in one shared helper). */
typedef void *(*cg__init_fn)(void);
__attribute__((always_inline)) static inline void *cg__tramp_call(int k, const char *name) {
  cg__init_fn f;
  void *r;
  int prev = cg__pending;
  *(void **) &f = cg__ours(name);
  if (!f)
    return NULL;
  cg__pending = k;
  r = f();
  cg__pending = prev;
  return r;
}

#define CG_TRAMP(k)                                                                       \
  __attribute__((noinline)) static void *cg__easy_init_##k(void) {                       \
    void *r = cg__tramp_call(k, "curl_easy_init");                                       \
    __asm__ volatile("" ::: "memory");                                                    \
    return r;                                                                             \
  }                                                                                       \
  __attribute__((noinline)) static void *cg__multi_init_##k(void) {                      \
    void *r = cg__tramp_call(k, "curl_multi_init");                                      \
    __asm__ volatile("" ::: "memory");                                                    \
    return r;                                                                             \
  }
CG_TRAMP(0)
CG_TRAMP(1)
CG_TRAMP(2)
CG_TRAMP(3)
CG_TRAMP(4)
CG_TRAMP(5)
CG_TRAMP(6)
CG_TRAMP(7)
#undef CG_TRAMP

static cg__init_fn const cg__easy_tramps[CG_LOADER_LIBS] = {
    (cg__init_fn) cg__easy_init_0, (cg__init_fn) cg__easy_init_1, (cg__init_fn) cg__easy_init_2,
    (cg__init_fn) cg__easy_init_3, (cg__init_fn) cg__easy_init_4, (cg__init_fn) cg__easy_init_5,
    (cg__init_fn) cg__easy_init_6, (cg__init_fn) cg__easy_init_7};
static cg__init_fn const cg__multi_tramps[CG_LOADER_LIBS] = {
    (cg__init_fn) cg__multi_init_0, (cg__init_fn) cg__multi_init_1,
    (cg__init_fn) cg__multi_init_2, (cg__init_fn) cg__multi_init_3,
    (cg__init_fn) cg__multi_init_4, (cg__init_fn) cg__multi_init_5,
    (cg__init_fn) cg__multi_init_6, (cg__init_fn) cg__multi_init_7};

/* lib.c's own dlsym(RTLD_NEXT, "curl_...") (caller inside libcurlguard).  Inside a
 * trampoline: that trampoline's libcurl.  Otherwise glibc's answer, and when glibc finds
 * none (the host opened its libcurl RTLD_LOCAL and calls the guard through a pointer it got
 * from dlsym), the libcurl the host last got a symbol of. */
static void *cg__next_for_guard(const char *name) {
  int k = cg__pending;
  void *p;

  if (k < 0 || k >= __atomic_load_n(&cg__nseen, __ATOMIC_ACQUIRE)) {
    p = cg__rdlsym(RTLD_NEXT, name);
    if (p)
      return p;
    k = __atomic_load_n(&cg__last, __ATOMIC_ACQUIRE);
    if (k < 0)
      return NULL;
  }
  return cg__rdlsym(cg__seen[k].handle, name);
}

/* What dlsym(handle, name) called from `caller` returns: &cg__dlsym_forward for "glibc's
 * own answer" (the stub then jumps to glibc with the host as caller), else the answer. */
static void *cg__dlsym_curl(void *handle, const char *name, const void *caller) {
  struct link_map *clm, *dlm;
  void *real, *ours;
  int slot;

  clm = cg__lm_of(caller);
  if (clm && cg__lm_is_guard(clm)) {
    /* The guard looking for the real libcurl (lib.c, cg__load). */
    if (handle == RTLD_NEXT && clm == cg__lm_of(&cg__self_marker))
      return cg__next_for_guard(name);
    return &cg__dlsym_forward;
  }
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT)
    return &cg__dlsym_forward;
  real = cg__rdlsym(handle, name);
  if (!real)
    return NULL; /* glibc's dlerror() text stays set for this thread */
  dlm = cg__lm_of(real);
  if (!dlm || cg__lm_is_guard(dlm) || !cg__is_curl_name(cg__basename(cg_lib_soname(dlm))))
    return real;
  ours = cg__ours(name);
  if (!ours)
    return real; /* a function the guard does not interpose: libcurl's own */
  slot = cg__seen_slot(dlm);
  if (slot < 0)
    return real; /* more libcurls than slots: unguarded, as before */
  __atomic_store_n(&cg__last, slot, __ATOMIC_RELEASE);
  if (strcmp(name, "curl_easy_init") == 0)
    return (void *) cg__easy_tramps[slot];
  if (strcmp(name, "curl_multi_init") == 0)
    return (void *) cg__multi_tramps[slot];
  return ours;
}

CG_HIDDEN CG_PLAIN void *cg__dlsym_decide(void *handle, const char *name, const void *caller) {
  cg__real_init();
  if (!name || name[0] != 'c' || name[1] != 'u' || name[2] != 'r' || name[3] != 'l' ||
      name[4] != '_')
    return &cg__dlsym_forward;
  /* RTLD_DEFAULT is never substituted (the global scope has the guard first already);
   * lib.c's duplicate check looks there from inside cg_lib_is_duplicate's pthread_once.
   * Off: nothing is ever substituted, and the guard's own lookups want glibc's answer. */
  if (handle == RTLD_DEFAULT || !cg__active())
    return &cg__dlsym_forward;
  return cg__dlsym_curl(handle, name, caller);
}

/* The exported entry points.  At entry %rsp+0 holds the host's return address; the stack
 * is 8 mod 16.  Both keep %rdi/%rsi (the host's arguments) across the decision and end in
 * a jump to glibc, so glibc's RETURN_ADDRESS(0) is the host's call site. */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        "  .cfi_startproc\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call cg__dlopen_mode\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  movl %eax, %esi\n"
        "  jmp *cg__real_dlopen(%rip)\n"
        "  .cfi_endproc\n"
        ".size dlopen, .-dlopen\n"
        "\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        "  movq (%rsp), %rdx\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call cg__dlsym_decide\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  leaq cg__dlsym_forward(%rip), %rcx\n"
        "  cmpq %rcx, %rax\n"
        "  je 1f\n"
        "  ret\n"
        "1:\n"
        "  jmp *cg__real_dlsym(%rip)\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");

#endif /* __x86_64__ && __ELF__ */
