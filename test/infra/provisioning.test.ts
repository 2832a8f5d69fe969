// Provisioning installs every tool the scripts call, so a bare Debian needs nothing preinstalled:
// each command word of every script (each pipeline stage's first word, `command -v` probes,
// `python3 -m` modules) is a shell builtin or keyword, a function or script of the project's own,
// a program of an essential (or required-priority) Debian package, or one that a package in
// provision.sh's APT_PACKAGES provides (dpkg -S), or a tool provisioning installs itself.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { composeNetworkHasDns } from "../support/podman.ts";
import { ROOT } from "../support/services.ts";

setDefaultTimeout(60_000);

/**
 * Installed by provision.sh itself rather than from APT_PACKAGES: Bun from npm; npm, Debian's
 * package where the machine has none (checked below).
 */
const PROVISIONED_TOOLS = new Set(["bun", "npm"]);
/** `python3 -m X` → the Debian package that provides module X. */
const PYTHON_MODULES: Record<string, string> = { venv: "python3-venv", zipfile: "libpython3-stdlib" };

const SCRIPTS = [
  ".ci/run",
  ...(readdirSync(`${ROOT}/scripts`, { recursive: true }) as string[])
    .filter((f) => f.endsWith(".sh") && !f.startsWith("image/standins/")) // those run inside their images
    .map((f) => `scripts/${f}`),
];

const sh = (script: string) => Bun.spawnSync(["bash", "-c", script], { stdout: "pipe", stderr: "pipe" }).stdout.toString().trim();
const BASH_WORDS = new Set(sh("compgen -k; compgen -b").split("\n"));

/**
 * A line with what is not code taken out: quoted text, `${…}` expansions, arithmetic and `[[ … ]]`
 * tests become blanks, a case label is dropped, and every `$(`, `(` and `)` becomes a segment
 * break (command substitutions inside double quotes are code and kept).
 */
function shellCode(line: string): string {
  line = line.replace(/\[\[.*?\]\]/g, " true ").replace(/\$?\(\(.*?\)\)/g, " 0 ").replace(/^\s*[^\s()$"']+\)(\s|$)/, " ");
  let out = "";
  const stack: string[] = [];
  for (let k = 0; k < line.length; k++) {
    const c = line[k]!;
    const inString = stack.at(-1) === '"';
    if (c === "\\") {
      k++;
      continue;
    }
    if (inString) {
      if (c === '"') stack.pop(), (out += " $q ");
      else if (c === "$" && line[k + 1] === "(") stack.push("("), (out += " ; "), k++;
      else if (c === "$" && line[k + 1] === "{") k = skipBraces(line, k + 1);
      continue;
    }
    if (c === "'") {
      const end = line.indexOf("'", k + 1);
      k = end < 0 ? line.length : end;
      out += " $q ";
    } else if (c === '"') stack.push('"');
    else if (c === "$" && line[k + 1] === "{") (k = skipBraces(line, k + 1)), (out += " $x ");
    else if (c === "$" && line[k + 1] === "(") stack.push("("), (out += " ; "), k++;
    else if (c === "(") stack.push("("), (out += " ; ");
    // What follows a closing parenthesis is an argument of the command around it (a placeholder word).
    else if (c === ")") stack.pop(), (out += " ; $x ");
    else out += c;
  }
  return out;
}

function skipBraces(line: string, open: number): number {
  let depth = 0;
  for (let k = open; k < line.length; k++) {
    if (line[k] === "{") depth++;
    else if (line[k] === "}" && --depth === 0) return k;
  }
  return line.length;
}

/** The command words of one script, with the line each was seen on. */
function commandWords(file: string): Array<{ word: string; line: number }> {
  const text = readFileSync(`${ROOT}/${file}`, "utf8");
  const out: Array<{ word: string; line: number }> = [];
  const functions = new Set<string>();
  let heredocEnd: string | null = null;
  text.split("\n").forEach((raw, i) => {
    if (heredocEnd !== null) {
      if (raw.trim() === heredocEnd) heredocEnd = null;
      return;
    }
    const doc = /<<-?\s*['"]?(\w+)['"]?/.exec(raw);
    if (doc) heredocEnd = doc[1]!;
    // Comments: a # at the start of a word, outside quotes.
    let line = "";
    let quote: string | null = null;
    for (let k = 0; k < raw.length; k++) {
      const c = raw[k]!;
      if (quote) {
        if (c === quote) quote = null;
      } else if (c === "'" || c === '"') quote = c;
      else if (c === "#" && (k === 0 || /\s/.test(raw[k - 1]!))) break;
      line += c;
    }
    const fn = /^\s*(?:function\s+)?([\w-]+)\s*\(\)\s*\{?/.exec(line);
    if (fn) functions.add(fn[1]!);
    for (const m of line.matchAll(/command -v (\w[\w.-]*)/g)) out.push({ word: m[1]!, line: i + 1 });
    for (const m of line.matchAll(/python3 -m (\w+)/g)) out.push({ word: `python3 -m ${m[1]}`, line: i + 1 });
    // Segments: what follows a pipe, a list operator, a subshell or command substitution, a group.
    for (const segment of shellCode(line).split(/\|\||&&|[|;&`]|(?:^|\s)[{}](?=\s|$)|\bthen\b|\bdo\b|\belse\b|\bif\b|\belif\b|\bwhile\b|\buntil\b|!/)) {
      const tokens = segment.trim().split(/\s+/).filter(Boolean);
      // Leading assignments and prefixes that run the next word.
      while (tokens.length && (/^\w+=/.test(tokens[0]!) || ["exec", "command", "time", "nohup", "builtin"].includes(tokens[0]!))) {
        if (tokens[0] === "command" && tokens[1] === "-v") break;
        tokens.shift();
      }
      const w = tokens[0];
      if (!w || w === "command") continue;
      if (/^[$"'/.~\[\]*<>0-9-]/.test(w) || w.includes("/") || w.includes("=")) continue;
      out.push({ word: w, line: i + 1 });
    }
  });
  return out.filter((o) => !functions.has(o.word));
}

/** The Debian package that provides a program: Debian's own path first (a machine may put another first in PATH). */
function packageOf(program: string): string | null {
  const path = sh(`command -v ${program}`);
  const candidates = new Set(["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map((d) => `${d}/${program}`));
  if (path.startsWith("/")) candidates.add(path).add(realpathSync(path));
  for (const p of [...candidates]) {
    if (p.startsWith("/usr/")) candidates.add(p.slice(4)); // usrmerge: dpkg may list /bin/…
    try {
      candidates.add(realpathSync(p));
    } catch {
      // not there
    }
  }
  for (const p of candidates) {
    const owner = sh(`dpkg -S ${p} 2>/dev/null | head -1`);
    if (owner) return owner.split(":")[0]!.split(",")[0]!.trim();
  }
  return null;
}

test("every command the scripts call is a builtin, the project's own, essential to Debian, or installed by provisioning", () => {
  const provision = readFileSync(`${ROOT}/scripts/provision.sh`, "utf8");
  const listed = /APT_PACKAGES=\(([^)]*)\)/.exec(provision)![1]!.split(/\s+/).filter(Boolean);
  // A listed package brings what it depends on (python3 brings python3-minimal, which has /usr/bin/python3).
  const depends = listed.flatMap((p) => sh(`dpkg-query -W -f='\${Depends}, \${Pre-Depends}' ${p} 2>/dev/null`).split(/[,|]/).map((d) => d.trim().split(/[\s:]/)[0]!));
  const aptPackages = new Set([...listed, ...depends].filter(Boolean));
  const functions = new Set(
    SCRIPTS.flatMap((f) => [...readFileSync(`${ROOT}/${f}`, "utf8").matchAll(/^\s*(?:function\s+)?([\w-]+)\s*\(\)/gm)].map((m) => m[1]!)),
  );
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const file of SCRIPTS)
    for (const { word, line } of commandWords(file)) {
      const where = `${file}:${line}`;
      if (BASH_WORDS.has(word) || functions.has(word) || PROVISIONED_TOOLS.has(word) || seen.has(word)) continue;
      if (word.startsWith("python3 -m ")) {
        const pkg = PYTHON_MODULES[word.slice(11)];
        if (!pkg || !aptPackages.has(pkg)) problems.push(`${where}: ${word}: no Debian package in APT_PACKAGES provides the module`);
        seen.set(word, pkg ?? "?");
        continue;
      }
      const pkg = packageOf(word);
      if (pkg === null) {
        problems.push(`${where}: ${word}: not installed, and provisioning does not install it`);
        continue;
      }
      const fields = sh(`dpkg-query -W -f='\${Essential} \${Priority}' ${pkg}`);
      const base = pkg.replace(/:amd64$/, "");
      if (!/^yes |required$/.test(fields) && !aptPackages.has(base))
        problems.push(`${where}: ${word} comes from ${base}, which is neither essential nor in APT_PACKAGES`);
      seen.set(word, base);
    }
  expect(seen.size).toBeGreaterThan(20);
  expect(problems).toEqual([]);
});

test("npm, which Bun's installation needs, is Debian's package unless the machine's Node.js brings its own", () => {
  const provision = readFileSync(`${ROOT}/scripts/provision.sh`, "utf8");
  expect(provision).toMatch(/command -v npm >\/dev\/null \|\| missing\+=\(npm\)/);
  expect(packageOf("npm")).not.toBeNull();
});

// No script calls the plugin by name, so the command-word check above cannot see it: a package the
// runtime needs is still a provisioning step.
test("podman's CNI dnsname plugin, which compose's service names need and no script calls, is provisioned and works", async () => {
  const provision = readFileSync(`${ROOT}/scripts/provision.sh`, "utf8");
  expect(/APT_PACKAGES=\(([^)]*)\)/.exec(provision)![1]!.split(/\s+/)).toContain("golang-github-containernetworking-plugin-dnsname");
  expect(await composeNetworkHasDns("cdr-provisioning-dns-probe")).toBe(true);
});
