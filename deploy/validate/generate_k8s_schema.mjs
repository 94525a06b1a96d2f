// Regenerates k8s_schema.json, the Kubernetes API schema that k8s_schema_check.py
// validates rendered manifests against. Run by hand when the pinned API version
// changes (the test never needs Node.js or the network):
//
//   mkdir /tmp/k8s-models && cd /tmp/k8s-models && npm install kubernetes-models@5.1.0
//   node deploy/validate/generate_k8s_schema.mjs /tmp/k8s-models/node_modules \
//       > deploy/validate/k8s_schema.json
//
// Source: the npm package kubernetes-models (generated from the Kubernetes OpenAPI
// specification). Its TypeScript declarations give each definition's properties,
// which are required, their types, enums, arrays and maps; its compiled JSON-schema
// validators (ajv) are probed to tell integer fields (and int32 ones) from numbers.
// Only the definitions reachable from KINDS are written.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const KINDS = [
  ["v1", "ConfigMap", "kubernetes-models/v1/ConfigMap"],
  ["v1", "Secret", "kubernetes-models/v1/Secret"],
  ["v1", "Service", "kubernetes-models/v1/Service"],
  ["v1", "PersistentVolumeClaim", "kubernetes-models/v1/PersistentVolumeClaim"],
  ["v1", "ServiceAccount", "kubernetes-models/v1/ServiceAccount"],
  ["v1", "Namespace", "kubernetes-models/v1/Namespace"],
  ["apps/v1", "Deployment", "kubernetes-models/apps/v1/Deployment"],
  ["apps/v1", "StatefulSet", "kubernetes-models/apps/v1/StatefulSet"],
  ["batch/v1", "Job", "kubernetes-models/batch/v1/Job"],
  ["policy/v1", "PodDisruptionBudget", "kubernetes-models/policy/v1/PodDisruptionBudget"],
  ["networking.k8s.io/v1", "NetworkPolicy", "kubernetes-models/networking.k8s.io/v1/NetworkPolicy"],
];

const nodeModules = process.argv[2];
if (!nodeModules || !fs.existsSync(path.join(nodeModules, "kubernetes-models"))) {
  console.error("usage: generate_k8s_schema.mjs NODE_MODULES (with kubernetes-models installed)");
  process.exit(2);
}
const version = JSON.parse(
  fs.readFileSync(path.join(nodeModules, "kubernetes-models/package.json"), "utf8")).version;

// ---- TypeScript declaration parsing -------------------------------------------------

// Resolves an import specifier of `fromFile` to a .d.ts path.
function resolveImport(fromFile, spec) {
  let p = spec.startsWith(".") ? path.join(path.dirname(fromFile), spec)
                               : path.join(nodeModules, spec);
  p = p.replace(/\.js$/, "");
  return p + ".d.ts";
}

function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

// Tokenizer + recursive-descent parser for the type expressions the declarations use.
function tokenize(s) {
  const re = /\s*("(?:[^"\\]|\\.)*"|[A-Za-z_$][A-Za-z0-9_$]*|[<>{}\[\]|;:?,()])/gy;
  const out = [];
  let m;
  while (re.lastIndex < s.length && (m = re.exec(s)) !== null) out.push(m[1]);
  if (re.lastIndex < s.trimEnd().length) throw new Error("cannot tokenize: " + s.slice(re.lastIndex, re.lastIndex + 40));
  return out;
}

function parseType(toks, i) {
  const alts = [];
  let r = parsePrimary(toks, i);
  alts.push(r.type);
  i = r.i;
  while (toks[i] === "|") {
    r = parsePrimary(toks, i + 1);
    alts.push(r.type);
    i = r.i;
  }
  if (alts.length === 1) return { type: alts[0], i };
  if (alts.every((a) => a.kind === "literal")) {
    return { type: { kind: "enum", values: alts.map((a) => a.value) }, i };
  }
  return { type: { kind: "union", alts }, i };
}

function parsePrimary(toks, i) {
  const t = toks[i];
  if (t === "string" || t === "number" || t === "boolean") return { type: { kind: t }, i: i + 1 };
  if (t === "any" || t === "unknown" || t === "object") return { type: { kind: "any" }, i: i + 1 };
  if (t.startsWith('"')) return { type: { kind: "literal", value: JSON.parse(t) }, i: i + 1 };
  if (t === "Array" && toks[i + 1] === "<") {
    const r = parseType(toks, i + 2);
    if (toks[r.i] !== ">") throw new Error("expected > after Array<");
    return { type: { kind: "array", items: r.type }, i: r.i + 1 };
  }
  if (t === "{") {
    if (toks[i + 1] === "}") return { type: { kind: "any" }, i: i + 2 };
    if (toks[i + 1] === "[") {
      if (toks[i + 2] !== "key" || toks[i + 3] !== ":" || toks[i + 4] !== "string" ||
          toks[i + 5] !== "]" || toks[i + 6] !== ":") {
        throw new Error("unsupported index signature at " + toks.slice(i, i + 8).join(" "));
      }
      const r = parseType(toks, i + 7);
      let j = r.i;
      if (toks[j] === ";") j++;
      if (toks[j] !== "}") throw new Error("expected } after map value type");
      return { type: { kind: "map", values: r.type }, i: j + 1 };
    }
    const r = parseMembers(toks, i + 1, "}");
    return { type: r.type, i: r.i + 1 };
  }
  if (/^[A-Za-z_$]/.test(t)) return { type: { kind: "ref", name: t }, i: i + 1 };
  throw new Error("unexpected token " + t);
}

// Members `"name"?: type;` up to `end` (a token, or the end of input when undefined).
function parseMembers(toks, i, end) {
  const properties = {};
  const required = [];
  while (i < toks.length && toks[i] !== end) {
    const name = toks[i].startsWith('"') ? JSON.parse(toks[i]) : toks[i];
    let optional = false;
    i++;
    if (toks[i] === "?") { optional = true; i++; }
    if (toks[i] !== ":") throw new Error(`expected : after ${name}`);
    const r = parseType(toks, i + 1);
    if (toks[r.i] !== ";") throw new Error(`expected ; after ${name}`);
    properties[name] = r.type;
    if (!optional) required.push(name);
    i = r.i + 1;
  }
  if (end !== undefined && toks[i] !== end) throw new Error("unterminated object type");
  const type = { kind: "object", properties, required, free: Object.keys(properties).length === 0 };
  return { type, i };
}

// Parses one .d.ts: its imports, and either `export interface IX [extends ..] {...}` or
// `export type IX = <type>;`. Returns { alias, type } where alias is the exported
// IIoK8s... name.
const fileCache = new Map();
function parseFile(file) {
  if (fileCache.has(file)) return fileCache.get(file);
  const text = stripComments(fs.readFileSync(file, "utf8"));
  const imports = new Map();
  for (const m of text.matchAll(/import \{ ([^}]+) \} from "([^"]+)";/g)) {
    for (const name of m[1].split(",").map((s) => s.trim())) imports.set(name, resolveImport(file, m[2]));
  }
  const aliasMatch = text.match(/export type \{ (I\w+) as (IIoK8s\w+)/);
  if (!aliasMatch) throw new Error("no exported IIoK8s alias in " + file);
  const alias = aliasMatch[2];
  let type;
  const iface = text.match(/export interface (\w+)(?: extends [\w, ]+)? \{([\s\S]*?)\n\}/);
  const typeAlias = text.match(/export type (I\w+) = ([^;]+);/);
  if (iface) {
    const toks = tokenize(iface[2]);
    const r = parseMembers(toks, 0, undefined);
    if (r.i !== toks.length) throw new Error(`${file}: trailing tokens in interface`);
    type = r.type;
  } else if (typeAlias) {
    type = parseType(tokenize(typeAlias[2]), 0).type;
  } else {
    throw new Error("neither interface nor type alias in " + file);
  }
  const parsed = { file, alias, type, imports };
  fileCache.set(file, parsed);
  return parsed;
}

// ---- Schema emission ------------------------------------------------------------------

const definitions = {};
const pendingProbes = [];

function defName(alias) { return alias.replace(/^I/, ""); }

function emitType(t, parsed) {
  switch (t.kind) {
    case "string": case "boolean": return { type: t.kind };
    case "number": return { type: "number" };
    case "any": return {};
    case "literal": return { enum: [t.value] };
    case "enum": return { type: "string", enum: t.values };
    case "array": return { type: "array", items: emitType(t.items, parsed) };
    case "map": return { type: "object", additionalProperties: emitType(t.values, parsed) };
    case "object": return emitObject(t, parsed, null);
    case "union": {
      const kinds = new Set(t.alts.map((a) => a.kind));
      if ([...kinds].every((k) => k === "string" || k === "number")) {
        return { type: ["string", "number"] };
      }
      throw new Error("unsupported union " + JSON.stringify(t));
    }
    case "ref": {
      const file = parsed.imports.get(t.name);
      if (!file) throw new Error(`${parsed.file}: unresolved type ${t.name}`);
      const target = parseFile(file);
      visit(target);
      return { $ref: defName(target.alias) };
    }
  }
  throw new Error("unknown type kind " + t.kind);
}

function visit(parsed) {
  const name = defName(parsed.alias);
  if (name in definitions) return;
  definitions[name] = null;  // Reserve (recursive types).
  const t = parsed.type;
  if (name.endsWith("IntOrString")) {
    definitions[name] = { type: ["string", "integer"] };  // Kubernetes int-or-string.
    return;
  }
  if (t.kind !== "object") {
    definitions[name] = emitType(t, parsed);
    return;
  }
  definitions[name] = emitObject(t, parsed, name);
}

// An object schema; numeric properties of named definitions are queued for probing.
function emitObject(t, parsed, name) {
  const schema = { type: "object" };
  if (t.free) return schema;  // Free-form JSON (e.g. FieldsV1).
  schema.properties = {};
  for (const [prop, pt] of Object.entries(t.properties)) {
    schema.properties[prop] = emitType(pt, parsed);
    if (pt.kind === "number" && name !== null) pendingProbes.push([parsed, prop]);
  }
  if (t.required.length) schema.required = t.required;
  return schema;
}

// Integer / int32 detection through the package's compiled validators.
async function probeNumbers() {
  for (const [parsed, prop] of pendingProbes) {
    const name = defName(parsed.alias);
    const pkgRoot = parsed.file.includes("@kubernetes-models/apimachinery")
      ? path.join(nodeModules, "@kubernetes-models/apimachinery")
      : path.join(nodeModules, "kubernetes-models");
    const validatorFile = path.join(pkgRoot, "_schemas", name + ".js");
    const { validate } = await import(pathToFileURL(validatorFile).href);
    const errorsFor = (value) => {
      validate({ [prop]: value });
      return (validate.errors || []).filter((e) => e.instancePath === "/" + prop);
    };
    const s = definitions[name].properties[prop];
    if (errorsFor(0.5).some((e) => e.keyword === "type" && e.params.type === "integer")) {
      s.type = "integer";
      if (errorsFor(2 ** 40).some((e) => e.keyword === "format" && e.params.format === "int32")) {
        s.format = "int32";
      }
    }
  }
}

const kinds = {};
for (const [apiVersion, kind, spec] of KINDS) {
  const parsed = parseFile(path.join(nodeModules, spec + ".d.ts"));
  visit(parsed);
  kinds[`${apiVersion}/${kind}`] = defName(parsed.alias);
}
await probeNumbers();

const sorted = {};
for (const k of Object.keys(definitions).sort()) sorted[k] = definitions[k];
process.stdout.write(JSON.stringify({
  source: `npm kubernetes-models@${version} (Kubernetes OpenAPI), generated by generate_k8s_schema.mjs`,
  kinds,
  definitions: sorted,
}, null, 1) + "\n");
