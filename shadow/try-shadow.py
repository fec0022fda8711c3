#!/usr/bin/python3
"""The experiment behind README "Reaching PHP and FFI hosts": a forward-only shadow libcurl
(every function of Debian's library with its symbol version, CURL_OPENSSL_4 or CURL_GNUTLS_3,
each a jump through a table filled from the real library dlopen'ed by absolute path), to be
found first through LD_LIBRARY_PATH.  NOT part of the product (curlguard chose src/loader.c);
kept so that the figures can be measured again:

    shadow/try-shadow.py OUTDIR [libcurl.so.4|libcurl-gnutls.so.4]
"""
import os, re, subprocess, sys

out = sys.argv[1] if len(sys.argv) > 1 else "build/shadow"
soname = sys.argv[2] if len(sys.argv) > 2 else "libcurl.so.4"
real = os.path.realpath("/usr/lib/x86_64-linux-gnu/" + soname)
os.makedirs(out, exist_ok=True)
dump = subprocess.run(["objdump", "-T", real], capture_output=True, text=True, check=True).stdout
funcs = sorted({(m.group(2), m.group(1)) for m in
                re.finditer(r"DF \.text\s+\S+\s+(CURL_\w+)\s+(\w+)$", dump, re.M)})
version = funcs[0][1]
with open(os.path.join(out, "shadow.map"), "w") as f:
    f.write("%s {\n global:\n%s local: *;\n};\n" % (version, "".join("  %s;\n" % n for n, _ in funcs)))
src = ['#include <dlfcn.h>', '#include <stdio.h>', '#include <stdlib.h>',
       "void *cg_shadow_tab[%d];" % len(funcs),
       "static const char *const names[] = {%s};" % ", ".join('"%s"' % n for n, _ in funcs),
       "__attribute__((constructor)) static void init(void) {",
       '  void *h = dlopen("%s", RTLD_NOW | RTLD_LOCAL);' % real,
       '  if (!h) { fprintf(stderr, "shadow: %s\\n", dlerror()); abort(); }',
       "  for (int i = 0; i < %d; i++) cg_shadow_tab[i] = dlsym(h, names[i]);" % len(funcs), "}"]
for i, (n, _) in enumerate(funcs):
    src.append('__asm__(".globl %s\\n.type %s,@function\\n%s: jmp *cg_shadow_tab+%d(%%rip)\\n");'
               % (n, n, n, i * 8))
with open(os.path.join(out, "shadow.c"), "w") as f:
    f.write("\n".join(src) + "\n")
os.makedirs(os.path.join(out, "lib"), exist_ok=True)
subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wl,-soname," + soname,
                "-Wl,--version-script=" + os.path.join(out, "shadow.map"),
                "-o", os.path.join(out, "lib", soname), os.path.join(out, "shadow.c"), "-ldl"],
               check=True)
print("%s/lib/%s: %d functions, version %s" % (out, soname, len(funcs), version))
