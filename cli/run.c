/* run.c - `curlguard run [--config F] -- CMD ARGS...`.
 *
 * Finds libcurlguard.so (CURLGUARD_LIB, else next to this executable, else
 * ../lib/curlguard/ from it, as `make install` lays it out), prepends it to LD_PRELOAD,
 * sets CURLGUARD=1 (and CURLGUARD_CONFIG), and execs CMD.  Nothing else is needed for
 * hosts that bind libcurl privately: the library itself takes RTLD_DEEPBIND off objects
 * that need libcurl (PHP) and answers dlsym on a libcurl handle (ctypes, ruby-ffi) with its
 * own entry points (src/loader.c).
 *
 * Before that it looks at CMD's ELF file and warns, in words, about what the guard cannot
 * reach (each a fact of the dynamic loader, ld.so(8)):
 *   - a static binary: no dynamic loader runs, so LD_PRELOAD is never read;
 *   - a set-user-ID or set-group-ID program run by someone else: the loader runs it in
 *     secure-execution mode and ignores LD_PRELOAD;
 *   - libcurl linked statically into the program or into one of the shared objects it is
 *     linked with (a defined curl_easy_perform in its symbol tables): those calls never
 *     leave that object, so no interposer sees them;
 *   - a program that does not link libcurl: only a libcurl it loads at run time, and the
 *     programs it starts, are guarded; a plugin with libcurl linked into it statically,
 *     loaded later, cannot be seen beforehand and is not guarded.
 * A stripped program with libcurl linked in statically has no symbol to find: it looks
 * like one that does not link libcurl (the same note then covers it).
 */
#include "cli.h"
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether `item` is one of the entries of LD_PRELOAD value `list` (NULL: none), which
 * ld.so splits at spaces and colons (ld.so(8)). */
static int cg__in_list(const char *list, const char *item) {
  size_t n = strlen(item);

  while (list && *list) {
    size_t k = strcspn(list, " :");
    if (k == n && strncmp(list, item, n) == 0)
      return 1;
    list += k;
    list += strspn(list, " :");
  }
  return 0;
}

/* ---- is CURLGUARD_LIB the guard? ----
 *
 * ld.so does not refuse a preload it cannot use: it prints its own error and runs the
 * command unguarded, and it preloads an executable (/bin/true is a PIE, ET_DYN) or
 * another library (libz, libcurl itself) without a word.  So the file is read first, as
 * untrusted input (elf(5); every offset and size is checked against the file's size, a
 * short read is a refusal): an ELF shared object (ET_DYN) of this program's class, byte
 * order and machine, whose dynamic symbol table exports curl_easy_perform (a defined
 * global or weak function of default or protected visibility) and whose DT_SONAME is
 * libcurlguard.so (as the Makefile links it; libcurl exports curl_easy_perform too), and
 * whose loadable segments lie inside the file.
 * Both ELF classes are read; the class must be this program's. */

#define CG__ELF_MAX_TABLE (64u << 20) /* a symbol or string table larger is not ours */

struct cg__elf {
  int fd;
  int is64;
  uint64_t size; /* of the file */
  uint64_t shoff, phoff;
  unsigned shnum, shentsize, phnum, phentsize, type, machine;
};

struct cg__shdr {
  unsigned type, link;
  uint64_t offset, size, entsize;
};

/* Whether [off, off + len) lies inside the file. */
static int cg__elf_inside(const struct cg__elf *e, uint64_t off, uint64_t len) {
  return off <= e->size && len <= e->size - off;
}

/* Read exactly `len` bytes at `off` of the file: 0, or -1 (outside it, short, error). */
static int cg__elf_read(const struct cg__elf *e, void *buf, uint64_t len, uint64_t off) {
  return cg__elf_inside(e, off, len) && off <= (uint64_t) INT64_MAX &&
                 pread(e->fd, buf, len, (off_t) off) == (ssize_t) len
             ? 0
             : -1;
}

/* Section header `i` into `sh`: 0, or -1. */
static int cg__elf_shdr(const struct cg__elf *e, unsigned i, struct cg__shdr *sh) {
  uint64_t off = e->shoff + (uint64_t) i * e->shentsize; /* shnum < 2^16: no overflow */
  if (e->is64) {
    Elf64_Shdr h;
    if (cg__elf_read(e, &h, sizeof(h), off) != 0)
      return -1;
    *sh = (struct cg__shdr){h.sh_type, h.sh_link, h.sh_offset, h.sh_size, h.sh_entsize};
  } else {
    Elf32_Shdr h;
    if (cg__elf_read(e, &h, sizeof(h), off) != 0)
      return -1;
    *sh = (struct cg__shdr){h.sh_type, h.sh_link, h.sh_offset, h.sh_size, h.sh_entsize};
  }
  return 0;
}

/* Section `sh`'s bytes (plus a NUL after them), or NULL: outside the file, too large. */
static char *cg__elf_load(const struct cg__elf *e, const struct cg__shdr *sh) {
  char *buf;
  if (sh->size > CG__ELF_MAX_TABLE || !cg__elf_inside(e, sh->offset, sh->size) ||
      !(buf = malloc(sh->size + 1)))
    return NULL;
  if (cg__elf_read(e, buf, sh->size, sh->offset) != 0) {
    free(buf);
    return NULL;
  }
  buf[sh->size] = '\0';
  return buf;
}

/* The string table linked from `sh` (its sh_link), or NULL; its size in `*len`. */
static char *cg__elf_linked_strings(const struct cg__elf *e, const struct cg__shdr *sh,
                                    uint64_t *len) {
  struct cg__shdr st;
  if (sh->link == 0 || sh->link >= e->shnum || cg__elf_shdr(e, sh->link, &st) != 0 ||
      st.type != SHT_STRTAB)
    return NULL;
  *len = st.size;
  return cg__elf_load(e, &st);
}

/* Whether the SHT_DYNSYM section `sh` exports the function `name`: 1, 0, -1 unreadable. */
static int cg__elf_exports(const struct cg__elf *e, const struct cg__shdr *sh,
                           const char *name) {
  size_t ent = e->is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  uint64_t strsz = 0;
  char *syms, *strs;
  int found = 0;

  if (sh->entsize != ent)
    return -1;
  if (!(strs = cg__elf_linked_strings(e, sh, &strsz)))
    return -1;
  if (!(syms = cg__elf_load(e, sh))) {
    free(strs);
    return -1;
  }
  for (uint64_t k = 0; k + ent <= sh->size && !found; k += ent) {
    unsigned st_name, info, other, shndx;
    if (e->is64) {
      Elf64_Sym y;
      memcpy(&y, syms + k, sizeof(y));
      st_name = y.st_name, info = y.st_info, other = y.st_other, shndx = y.st_shndx;
    } else {
      Elf32_Sym y;
      memcpy(&y, syms + k, sizeof(y));
      st_name = y.st_name, info = y.st_info, other = y.st_other, shndx = y.st_shndx;
    }
    found = shndx != SHN_UNDEF && st_name < strsz &&
            (ELF64_ST_BIND(info) == STB_GLOBAL || ELF64_ST_BIND(info) == STB_WEAK) &&
            (ELF64_ST_TYPE(info) == STT_FUNC || ELF64_ST_TYPE(info) == STT_GNU_IFUNC) &&
            (ELF64_ST_VISIBILITY(other) == STV_DEFAULT ||
             ELF64_ST_VISIBILITY(other) == STV_PROTECTED) &&
            strcmp(strs + st_name, name) == 0;
  }
  free(syms);
  free(strs);
  return found;
}

/* The DT_SONAME of the SHT_DYNAMIC section `sh` into `out` ("" when none): 0, -1. */
static int cg__elf_soname(const struct cg__elf *e, const struct cg__shdr *sh, char *out,
                          size_t len) {
  size_t ent = e->is64 ? sizeof(Elf64_Dyn) : sizeof(Elf32_Dyn);
  uint64_t strsz = 0;
  char *dyn, *strs;

  out[0] = '\0';
  if (!(strs = cg__elf_linked_strings(e, sh, &strsz)))
    return -1;
  if (!(dyn = cg__elf_load(e, sh))) {
    free(strs);
    return -1;
  }
  for (uint64_t k = 0; k + ent <= sh->size; k += ent) {
    int64_t tag;
    uint64_t val;
    if (e->is64) {
      Elf64_Dyn d;
      memcpy(&d, dyn + k, sizeof(d));
      tag = d.d_tag, val = d.d_un.d_val;
    } else {
      Elf32_Dyn d;
      memcpy(&d, dyn + k, sizeof(d));
      tag = d.d_tag, val = d.d_un.d_val;
    }
    if (tag == DT_NULL)
      break;
    if (tag == DT_SONAME && val < strsz) {
      snprintf(out, len, "%s", strs + val);
      break;
    }
  }
  free(dyn);
  free(strs);
  return 0;
}

/* Whether every segment the loader maps (PT_LOAD) lies inside the file: 0, or -1 (a
 * copy cut short, whose section headers were rewritten, would be mapped past its end). */
static int cg__elf_segments_inside(const struct cg__elf *e) {
  int loads = 0;

  if (e->phentsize != (e->is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)) || e->phnum == 0)
    return -1;
  for (unsigned i = 0; i < e->phnum; i++) {
    uint64_t off = e->phoff + (uint64_t) i * e->phentsize, type, at, size;
    if (e->is64) {
      Elf64_Phdr ph;
      if (cg__elf_read(e, &ph, sizeof(ph), off) != 0)
        return -1;
      type = ph.p_type, at = ph.p_offset, size = ph.p_filesz;
    } else {
      Elf32_Phdr ph;
      if (cg__elf_read(e, &ph, sizeof(ph), off) != 0)
        return -1;
      type = ph.p_type, at = ph.p_offset, size = ph.p_filesz;
    }
    if (type == PT_LOAD) {
      if (!cg__elf_inside(e, at, size))
        return -1;
      loads++;
    }
  }
  return loads > 0 ? 0 : -1;
}

/* The ELF identity of this program (class, byte order, machine) from /proc/self/exe:
 * 0, or -1 when it cannot be read (then any is taken). */
static int cg__own_elf(unsigned char *cls, unsigned char *data, unsigned *machine) {
  unsigned char h[sizeof(Elf64_Ehdr)];
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? pread(fd, h, sizeof(h), 0) : -1;

  if (fd >= 0)
    close(fd);
  if (n < (ssize_t) sizeof(Elf32_Ehdr) || memcmp(h, ELFMAG, SELFMAG) != 0)
    return -1;
  *cls = h[EI_CLASS];
  *data = h[EI_DATA];
  /* e_machine is at the same offset (18) in both classes */
  *machine = ((Elf32_Ehdr *) (void *) h)->e_machine;
  return 0;
}

/* Whether `path` is a libcurlguard.so this program can preload: 0, or -1 with why not
 * in `why` (a phrase; errno's text when it cannot be opened). */
static int cg__is_guard_lib(const char *path, char *why, size_t len) {
  unsigned char h[sizeof(Elf64_Ehdr)], cls = 0, data = 0;
  struct cg__elf e = {.fd = -1};
  unsigned machine = 0;
  int own = cg__own_elf(&cls, &data, &machine) == 0, exported = 0, symtab = 0, dynamic = 0;
  char soname[256] = "";
  struct stat st;
  ssize_t n;

  /* O_NONBLOCK: a FIFO would block the open until a writer came (helper-70); it is
   * refused below as not a regular file, on which the flag changes nothing. */
  if ((e.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0 || fstat(e.fd, &st) != 0) {
    snprintf(why, len, "%s", strerror(errno));
    if (e.fd >= 0)
      close(e.fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, len, "not a shared library (not a regular file)");
    close(e.fd);
    return -1;
  }
  e.size = (uint64_t) st.st_size;
  n = pread(e.fd, h, sizeof(h), 0);
  if (n < SELFMAG || memcmp(h, ELFMAG, SELFMAG) != 0) {
    snprintf(why, len, "not a shared library (not an ELF file)");
    close(e.fd);
    return -1;
  }
  e.is64 = h[EI_CLASS] == ELFCLASS64;
  if ((h[EI_CLASS] != ELFCLASS64 && h[EI_CLASS] != ELFCLASS32) ||
      n < (ssize_t) (e.is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr))) {
    snprintf(why, len, "not a shared library (a truncated or damaged ELF file)");
    close(e.fd);
    return -1;
  }
  if (e.is64) {
    Elf64_Ehdr eh;
    memcpy(&eh, h, sizeof(eh));
    e.type = eh.e_type, e.machine = eh.e_machine, e.shoff = eh.e_shoff;
    e.shnum = eh.e_shnum, e.shentsize = eh.e_shentsize;
    e.phoff = eh.e_phoff, e.phnum = eh.e_phnum, e.phentsize = eh.e_phentsize;
  } else {
    Elf32_Ehdr eh;
    memcpy(&eh, h, sizeof(eh));
    e.type = eh.e_type, e.machine = eh.e_machine, e.shoff = eh.e_shoff;
    e.shnum = eh.e_shnum, e.shentsize = eh.e_shentsize;
    e.phoff = eh.e_phoff, e.phnum = eh.e_phnum, e.phentsize = eh.e_phentsize;
  }
  if (own && (h[EI_CLASS] != cls || h[EI_DATA] != data || e.machine != machine)) {
    snprintf(why, len, "built for another machine (ELF class %u, byte order %u, machine %u; "
             "this curlguard's: %u, %u, %u)", h[EI_CLASS], h[EI_DATA], e.machine, cls, data,
             machine);
    close(e.fd);
    return -1;
  }
  if (e.type != ET_DYN) {
    if (e.type == ET_EXEC || e.type == ET_REL)
      snprintf(why, len, "not a shared library (an ELF %s)",
               e.type == ET_EXEC ? "executable" : "object file");
    else
      snprintf(why, len, "not a shared library (an ELF file of type %u)", e.type);
    close(e.fd);
    return -1;
  }
  if (cg__elf_segments_inside(&e) != 0) {
    snprintf(why, len, "not a shared library (a truncated or damaged ELF file: its "
             "segments lie past its end)");
    close(e.fd);
    return -1;
  }
  if (e.shentsize != (e.is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)) || e.shnum == 0 ||
      !cg__elf_inside(&e, e.shoff, (uint64_t) e.shnum * e.shentsize)) {
    snprintf(why, len, "not a shared library (a truncated or damaged ELF file: its "
             "section headers are missing)");
    close(e.fd);
    return -1;
  }
  /* Only the first SHT_DYNSYM and SHT_DYNAMIC are read (elf(5): an object has one of
   * each; the loader reads neither through the section headers): 65,535 headers naming
   * the same table, without the symbol, read it 65,535 times (helper-70: minutes). */
  for (unsigned i = 0; i < e.shnum; i++) {
    struct cg__shdr sh;
    int r = 0;
    if (cg__elf_shdr(&e, i, &sh) != 0)
      r = -1;
    else if (sh.type == SHT_DYNSYM && !symtab) {
      symtab = 1;
      r = (exported = cg__elf_exports(&e, &sh, "curl_easy_perform")) < 0 ? -1 : 0;
    } else if (sh.type == SHT_DYNAMIC && !dynamic)
      r = (dynamic = cg__elf_soname(&e, &sh, soname, sizeof(soname)) == 0) ? 0 : -1;
    if (r != 0) {
      snprintf(why, len, "not a shared library (a truncated or damaged ELF file)");
      close(e.fd);
      return -1;
    }
  }
  close(e.fd);
  if (exported != 1) {
    snprintf(why, len, "not libcurlguard.so: it exports no curl_easy_perform (a program "
             "or another library)");
    return -1;
  }
  if (strncmp(soname, "libcurlguard.so", 15) != 0) {
    char shown[256]; /* cut short to fit */
    cg_cli_shown(soname[0] ? soname : "none", shown, sizeof(shown));
    snprintf(why, len, "not libcurlguard.so: it exports curl_easy_perform but its soname is "
             "%s (libcurl itself?)", shown);
    return -1;
  }
  return 0;
}

/* Locate libcurlguard.so into `out`.  0 on success (errno set otherwise). */
static int cg__find_lib(char *out, size_t len) {
  const char *env = getenv("CURLGUARD_LIB");
  char exe[PATH_MAX - 64];
  ssize_t n;
  char *slash;

  if (env && env[0]) {
    snprintf(out, len, "%s", env);
    return access(out, R_OK) == 0 ? 0 : -1;
  }
  n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0)
    return -1;
  exe[n] = '\0';
  slash = strrchr(exe, '/');
  if (!slash)
    return -1;
  *slash = '\0';
  if ((size_t) snprintf(out, len, "%s/libcurlguard.so", exe) < len && access(out, R_OK) == 0)
    return 0;
  if ((size_t) snprintf(out, len, "%s/../lib/curlguard/libcurlguard.so", exe) < len &&
      access(out, R_OK) == 0)
    return 0;
  return -1;
}

/* Resolve `cmd` through PATH as execvp would.  0 on success. */
static int cg__which(const char *cmd, char *out, size_t len) {
  const char *path = getenv("PATH");
  const char *p;

  if (strchr(cmd, '/')) {
    snprintf(out, len, "%s", cmd);
    return access(out, X_OK) == 0 ? 0 : -1;
  }
  if (!path)
    path = "/usr/local/bin:/usr/bin:/bin";
  for (p = path; *p;) {
    size_t dl = strcspn(p, ":");
    snprintf(out, len, "%.*s/%s", (int) (dl ? dl : 1), dl ? p : ".", cmd);
    if (access(out, X_OK) == 0) {
      struct stat st;
      if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
        return 0;
    }
    p += dl;
    if (*p == ':')
      p++;
  }
  return -1;
}

/* The ELF interpreter of `path` into `interp` (empty when static).  Returns 0 for an
 * ELF file, 1 for a "#!" script (its interpreter path in `interp`), -1 otherwise. */
static int cg__inspect(const char *path, char *interp, size_t len) {
  unsigned char buf[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: no wait for a writer */
  ssize_t n;
  Elf64_Ehdr eh;
  int i;

  interp[0] = '\0';
  if (fd < 0)
    return -1;
  n = read(fd, buf, sizeof(buf) - 1);
  if (n >= 2 && buf[0] == '#' && buf[1] == '!') {
    size_t s = 2, e;
    buf[n] = '\0';
    while (buf[s] == ' ' || buf[s] == '\t')
      s++;
    e = s + strcspn((char *) buf + s, " \t\n");
    snprintf(interp, len, "%.*s", (int) (e - s), buf + s);
    close(fd);
    return 1;
  }
  if (n < (ssize_t) sizeof(eh) || memcmp(buf, ELFMAG, SELFMAG) != 0 ||
      buf[EI_CLASS] != ELFCLASS64) {
    close(fd);
    return -1;
  }
  memcpy(&eh, buf, sizeof(eh));
  for (i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof(ph), (off_t) (eh.e_phoff + (Elf64_Off) i * eh.e_phentsize)) !=
        (ssize_t) sizeof(ph))
      break;
    if (ph.p_type == PT_INTERP && ph.p_filesz > 0 && ph.p_filesz < len) {
      if (pread(fd, interp, ph.p_filesz, (off_t) ph.p_offset) == (ssize_t) ph.p_filesz)
        interp[ph.p_filesz - 1] = '\0';
      break;
    }
  }
  close(fd);
  return 0;
}

/* Whether the dynamic loader `interp` lists a libcurl among `path`'s libraries
 * ("ld.so --list", what ldd(1) runs; it does not run the program).  -1 unknown.  The
 * listing itself (one library a line, "name => /path (addr)") is left in `acc`. */
static int cg__links_libcurl(const char *interp, const char *path, char *acc, size_t cap) {
  int pipefd[2], status, found = 0;
  pid_t pid;
  char buf[4096];
  size_t used = 0;
  ssize_t n;

  if (pipe2(pipefd, O_CLOEXEC) != 0)
    return -1;
  pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return -1;
  }
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(pipefd[1], STDOUT_FILENO);
    if (null >= 0)
      dup2(null, STDERR_FILENO);
    unsetenv("LD_PRELOAD");
    execl(interp, interp, "--list", path, (char *) NULL);
    _exit(127);
  }
  close(pipefd[1]);
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) {
    size_t take = (size_t) n < cap - 1 - used ? (size_t) n : cap - 1 - used;
    memcpy(acc + used, buf, take);
    used += take;
  }
  acc[used] = '\0';
  close(pipefd[0]);
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  found = strstr(acc, "libcurl.so") != NULL || strstr(acc, "libcurl-gnutls.so") != NULL ||
          strstr(acc, "libcurl-nss.so") != NULL;
  return found;
}

/* Whether the ELF file `path` defines curl_easy_perform itself (in .dynsym or .symtab):
 * libcurl linked into it statically.  0 when not, or when it cannot be read. */
static int cg__defines_curl(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  Elf64_Ehdr eh;
  int i, found = 0;

  if (fd < 0)
    return 0;
  if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t) sizeof(eh) ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr)) {
    close(fd);
    return 0;
  }
  for (i = 0; i < eh.e_shnum && !found; i++) {
    Elf64_Shdr sh, st;
    Elf64_Sym *syms = NULL;
    char *strs = NULL;
    size_t n, k;

    if (pread(fd, &sh, sizeof(sh), (off_t) (eh.e_shoff + (Elf64_Off) i * sizeof(sh))) !=
            (ssize_t) sizeof(sh) ||
        (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_link >= eh.e_shnum ||
        pread(fd, &st, sizeof(st), (off_t) (eh.e_shoff + (Elf64_Off) sh.sh_link * sizeof(st))) !=
            (ssize_t) sizeof(st) ||
        sh.sh_size > (64u << 20) || st.sh_size > (64u << 20) || st.sh_size == 0)
      continue;
    syms = malloc(sh.sh_size ? sh.sh_size : 1);
    strs = malloc(st.sh_size + 1);
    if (syms && strs &&
        pread(fd, syms, sh.sh_size, (off_t) sh.sh_offset) == (ssize_t) sh.sh_size &&
        pread(fd, strs, st.sh_size, (off_t) st.sh_offset) == (ssize_t) st.sh_size) {
      strs[st.sh_size] = '\0';
      n = sh.sh_size / sizeof(Elf64_Sym);
      for (k = 0; k < n && !found; k++)
        found = syms[k].st_shndx != SHN_UNDEF && syms[k].st_name < st.sh_size &&
                ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC &&
                strcmp(strs + syms[k].st_name, "curl_easy_perform") == 0;
    }
    free(syms);
    free(strs);
  }
  close(fd);
  return found;
}

/* A libcurl by its file name: libcurl.so.4, libcurl-gnutls.so.4, a wheel's libcurl-abc.so. */
static int cg__is_libcurl_file(const char *p) {
  const char *b = strrchr(p, '/');
  b = b ? b + 1 : p;
  return strncmp(b, "libcurl", 7) == 0 && (b[7] == '.' || b[7] == '-') &&
         strncmp(b, "libcurlguard", 12) != 0;
}

/* The first library of an "ld.so --list" listing that has libcurl linked into it
 * statically, into `out`; 0 when there is none. */
static int cg__static_curl_dep(const char *listing, char *out, size_t len) {
  const char *line = listing;

  while (line && *line) {
    const char *end = strchr(line, '\n'), *p, *q;
    size_t l = end ? (size_t) (end - line) : strlen(line);
    char file[PATH_MAX];

    p = memchr(line, '/', l);
    if (p) {
      q = p;
      while (q < line + l && *q != ' ' && *q != '\t')
        q++;
      if ((size_t) (q - p) < sizeof(file)) {
        memcpy(file, p, (size_t) (q - p));
        file[q - p] = '\0';
        if (!cg__is_libcurl_file(file) && strstr(file, "libcurlguard") == NULL &&
            cg__defines_curl(file)) {
          snprintf(out, len, "%s", file);
          return 1;
        }
      }
    }
    line = end ? end + 1 : NULL;
  }
  return 0;
}

/* Whether the loader runs `st`'s program in secure-execution mode for us (ld.so(8): a
 * set-user-ID or set-group-ID program whose IDs differ from the caller's): LD_PRELOAD is
 * then ignored (only libraries in the system directories that are set-user-ID themselves
 * would be loaded, and libcurlguard.so is not). */
static int cg__secure_exec(const struct stat *st) {
  return ((st->st_mode & S_ISUID) && st->st_uid != geteuid()) ||
         ((st->st_mode & S_ISGID) && st->st_gid != getegid());
}

/* Warn when CMD cannot be guarded, in words a user understands. */
static void cg__check_target(const char *cmd) {
  char path[PATH_MAX], interp[PATH_MAX], dep[PATH_MAX];
  static char listing[65536];
  struct stat st;
  int kind, links;

  if (cg__which(cmd, path, sizeof(path)) != 0)
    return; /* execvp will report it */
  kind = cg__inspect(path, interp, sizeof(interp));
  if (kind == 1) {
    char script_interp[PATH_MAX];
    /* A script: what matters is its interpreter, e.g. python3 loading pycurl. */
    if (interp[0] == '\0' || cg__inspect(interp, script_interp, sizeof(script_interp)) != 0)
      return;
    if (script_interp[0] == '\0')
      cg_cli_error("warning: %s runs under %s, a static binary: LD_PRELOAD cannot reach "
                   "it, so the guard will not see its requests", cmd, interp);
    return;
  }
  if (kind != 0)
    return;
  if (interp[0] == '\0') {
    cg_cli_error("warning: %s is a static binary: LD_PRELOAD cannot reach it, so the "
                 "guard will not see its requests", cmd);
    return;
  }
  if (stat(path, &st) == 0 && cg__secure_exec(&st)) {
    cg_cli_error("warning: %s is set-user-ID or set-group-ID: the dynamic loader ignores "
                 "LD_PRELOAD for it, so the guard will not see its requests", cmd);
    return;
  }
  if (cg__defines_curl(path)) {
    cg_cli_error("warning: %s has libcurl linked into it statically: its calls never "
                 "leave the program, so the guard will not see its requests", cmd);
    return;
  }
  listing[0] = '\0';
  links = cg__links_libcurl(interp, path, listing, sizeof(listing));
  if (links >= 0 && cg__static_curl_dep(listing, dep, sizeof(dep))) {
    cg_cli_error("warning: %s is linked with %s, which has libcurl linked into it "
                 "statically: requests made through that library are not guarded", cmd, dep);
    return;
  }
#if defined(__x86_64__)
  if (links == 0)
    cg_cli_error("note: %s does not use libcurl when it starts (no libcurl among its "
                 "libraries): a libcurl it loads later, by name or path (PHP's curl "
                 "extension, pycurl, ctypes, ruby-ffi), and the libcurl programs it starts "
                 "are guarded; libcurl linked statically into a plugin it loads is not",
                 cmd);
#else
  /* src/loader.c's dlopen/dlsym exist on x86-64 only: PHP and FFI hosts are missed here. */
  if (links == 0)
    cg_cli_error("note: %s does not use libcurl when it starts (no libcurl among its "
                 "libraries): a libcurl it loads later is guarded only when loaded as pycurl "
                 "does; PHP's curl extension and FFI bindings (ctypes, ruby-ffi) are not "
                 "reached on this architecture, nor is libcurl linked statically into a "
                 "plugin", cmd);
#endif
}

/* Set `name` to `path` made absolute against the current directory. */
static void cg__setenv_abs(const char *name, const char *path) {
  char cwd[PATH_MAX], *abs;
  size_t need;

  if (path[0] == '/' || path[0] == '\0' || !getcwd(cwd, sizeof(cwd))) {
    setenv(name, path, 1);
    return;
  }
  need = strlen(cwd) + strlen(path) + 2;
  abs = malloc(need);
  if (!abs) {
    setenv(name, path, 1);
    return;
  }
  snprintf(abs, need, "%s/%s", cwd, path);
  setenv(name, abs, 1);
  free(abs);
}

int cg_cli_run(int argc, char **argv) {
  const char *config = NULL;
  const char *old;
  char lib[PATH_MAX], why[512];
  char *preload;
  int i;
  size_t need;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    if (strcmp(argv[i], "--config") == 0 && i + 1 == argc) {
      cg_cli_error("run: --config needs a FILE (usage: curlguard run [--config F] -- CMD "
                   "ARGS...)");
      return CG_EXIT_USAGE;
    } else if (strcmp(argv[i], "--config") == 0) {
      config = argv[++i];
    } else if (strncmp(argv[i], "--config=", 9) == 0) {
      config = argv[i] + 9;
    } else if (argv[i][0] == '-') {
      cg_cli_error("run: unknown option \"%s\" (usage: curlguard run [--config F] -- CMD "
                   "ARGS...)", argv[i]);
      return CG_EXIT_USAGE;
    } else {
      break; /* CMD without "--" */
    }
  }
  if (i >= argc) {
    cg_cli_error("run: no command given (usage: curlguard run [--config F] -- CMD ARGS...)");
    return CG_EXIT_USAGE;
  }
  /* Read as stat and reset read it: a directory or malformed JSON is refused here, not
   * found by the first guarded call inside the command (helper-62); the one named by
   * CURLGUARD_CONFIG too (helper-65). */
  {
    const char *cf = config ? config : getenv("CURLGUARD_CONFIG");
    if (cf && (config || cf[0]) && cg_config_file_usable(cf, why, sizeof(why)) != 0) {
      cg_cli_error("run: config file %s%s: %s", cf, config ? "" : " (CURLGUARD_CONFIG)", why);
      return CG_EXIT_ERROR; /* curlguard(1): 1 when the configuration file cannot be read */
    }
  }
  if (cg__find_lib(lib, sizeof(lib)) != 0) {
    if (getenv("CURLGUARD_LIB") && getenv("CURLGUARD_LIB")[0])
      cg_cli_error("run: CURLGUARD_LIB=%s: %s", getenv("CURLGUARD_LIB"), strerror(errno));
    else
      cg_cli_error("run: cannot find libcurlguard.so next to this program or in "
                   "../lib/curlguard/ (set CURLGUARD_LIB)");
    return CG_EXIT_ERROR;
  }
  if (lib[0] != '/') {
    /* A relative CURLGUARD_LIB is looked up by ld.so from the directory each process
     * starts in: a command that changes directory (sh -c 'cd /srv && curl ...') ran
     * unguarded (helper-70), and a bare file name is searched for in the system's
     * library directories, not here.  Kept relative only when the current directory's
     * path holds a space or a colon, which LD_PRELOAD cannot carry (checked below). */
    char cwd[PATH_MAX], abs[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) && !strpbrk(cwd, " :\t\n")) {
      if ((size_t) snprintf(abs, sizeof(abs), "%s/%s", cwd, lib) < sizeof(abs))
        memcpy(lib, abs, sizeof(lib));
    } else if (!strchr(lib, '/') &&
               (size_t) snprintf(abs, sizeof(abs), "./%s", lib) < sizeof(abs)) {
      memcpy(lib, abs, sizeof(lib));
    }
  }
  if (cg__is_guard_lib(lib, why, sizeof(why)) != 0) {
    /* ld.so would print its own errors, or none, and run the command unguarded */
    cg_cli_error("run: cannot preload %s: %s", lib, why);
    return CG_EXIT_ERROR;
  }
  if (strpbrk(lib, " :\t\n")) {
    /* ld.so splits LD_PRELOAD at spaces and colons (ld.so(8)): it would not load it. */
    cg_cli_error("run: cannot preload %s: its path contains a space or a colon (move or "
                 "install it elsewhere)", lib);
    return CG_EXIT_ERROR;
  }
  cg__check_target(argv[i]);

  old = getenv("LD_PRELOAD");
  need = strlen(lib) + (old ? strlen(old) + 1 : 0) + 1;
  preload = malloc(need);
  if (!preload) {
    cg_cli_error("run: out of memory");
    return CG_EXIT_ERROR;
  }
  if (cg__in_list(old, lib))
    snprintf(preload, need, "%s", old); /* a run inside a run: preloaded once already */
  else
    snprintf(preload, need, "%s%s%s", lib, old && old[0] ? ":" : "", old ? old : "");
  setenv("LD_PRELOAD", preload, 1);
  setenv("CURLGUARD", "1", 1);
  /* Paths relative to here would move with every child that changes directory. */
  if (config)
    cg__setenv_abs("CURLGUARD_CONFIG", config);
  else if (getenv("CURLGUARD_CONFIG") && getenv("CURLGUARD_CONFIG")[0])
    cg__setenv_abs("CURLGUARD_CONFIG", getenv("CURLGUARD_CONFIG"));
  /* "off" in any case means no log (src/config.c: strcasecmp), not a file named OFF. */
  if (getenv("CURLGUARD_LOG") && strcmp(getenv("CURLGUARD_LOG"), "-") != 0 &&
      strcasecmp(getenv("CURLGUARD_LOG"), "off") != 0)
    cg__setenv_abs("CURLGUARD_LOG", getenv("CURLGUARD_LOG"));
  if (getenv("CURLGUARD_STATE"))
    cg__setenv_abs("CURLGUARD_STATE", getenv("CURLGUARD_STATE"));
  free(preload);
  execvp(argv[i], argv + i);
  cg_cli_error("run: cannot run %s: %s", argv[i], strerror(errno));
  return CG_EXIT_ERROR;
}
