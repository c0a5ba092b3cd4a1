import { fileURLToPath } from "node:url";
import ts from "typescript";

/**
 * The Prelude SDK (@prelude.so/sdk, a devDependency) as the judge of V2 REST answers. Stainless
 * generates it and it validates nothing at run time, so its declared types are the contract: an
 * answer conforms when TypeScript accepts it, written as a JSON literal, for the SDK's type.
 */

export type PreludeModel =
  "VerificationCreateResponse" | "VerificationCheckResponse" | "LookupLookupResponse";

export interface PreludeSample {
  model: PreludeModel;
  value: unknown;
  label: string;
}

const MODULE_OF: Record<PreludeModel, string> = {
  VerificationCreateResponse: "@prelude.so/sdk/resources/verification",
  VerificationCheckResponse: "@prelude.so/sdk/resources/verification",
  LookupLookupResponse: "@prelude.so/sdk/resources/lookup",
};

// The SDK's literal unions, as TypeScript sees them (aliases and all), not as we would copy them.
const ENUM_TYPES = {
  createStatus: `VerificationCreateResponse["status"]`,
  createReason: `NonNullable<VerificationCreateResponse["reason"]>`,
  createMethod: `VerificationCreateResponse["method"]`,
  channels: `NonNullable<VerificationCreateResponse["channels"]>[number]`,
  checkStatus: `VerificationCheckResponse["status"]`,
  lookupLineType: `NonNullable<LookupLookupResponse["line_type"]>`,
  lookupFlag: `NonNullable<LookupLookupResponse["flags"]>[number]`,
} as const;

export type PreludeEnum = keyof typeof ENUM_TYPES;

// Only in memory; placed beside this file so that the SDK resolves from our node_modules, and .mts
// so that it is ESM (the SDK's "exports" then answer with the types of its "import" condition).
const VIRTUAL_FILE = fileURLToPath(new URL("./prelude-samples.virtual.mts", import.meta.url));

const OPTIONS: ts.CompilerOptions = {
  strict: true,
  exactOptionalPropertyTypes: true,
  noEmit: true,
  skipLibCheck: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ["lib.es2022.d.ts"],
  // Only what the SDK's declarations reference themselves (not @types/mocha and the rest).
  types: [],
};

// The SDK's and the standard library's declarations do not change during a run: parsing them once
// and handing the previous program to the next one makes every batch after the first cheap.
const parsed = new Map<string, ts.SourceFile>();
let previous: ts.Program | undefined;

function compile(text: string): { program: ts.Program; file: ts.SourceFile } {
  const host = ts.createCompilerHost(OPTIONS, true);
  const read = host.getSourceFile.bind(host);
  let file: ts.SourceFile | undefined;
  host.getSourceFile = (name, version, onError) => {
    if (name === VIRTUAL_FILE) return (file = ts.createSourceFile(name, text, version, true));
    let sf = parsed.get(name);
    if (sf === undefined) {
      sf = read(name, version, onError);
      if (sf !== undefined) parsed.set(name, sf);
    }
    return sf;
  };
  const exists = host.fileExists.bind(host);
  host.fileExists = (name) => name === VIRTUAL_FILE || exists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => (name === VIRTUAL_FILE ? text : readFile(name));
  const program = ts.createProgram({
    rootNames: [VIRTUAL_FILE],
    options: OPTIONS,
    host,
    oldProgram: previous,
  });
  previous = program;
  if (file === undefined) throw new Error("the compiler never asked for the samples file");
  return { program, file };
}

function imports(): string[] {
  const byModule = new Map<string, PreludeModel[]>();
  for (const [model, specifier] of Object.entries(MODULE_OF) as [PreludeModel, string][]) {
    byModule.set(specifier, [...(byModule.get(specifier) ?? []), model]);
  }
  return [...byModule].map(
    ([specifier, models]) => `import type { ${models.join(", ")} } from "${specifier}";`,
  );
}

function oneLine(d: ts.Diagnostic): string {
  return ts
    .flattenDiagnosticMessageText(d.messageText, "\n")
    .split("\n")
    .map((l) => l.trim())
    .join(" ");
}

/**
 * A diagnostic outside the samples means the checker itself is broken: an import that no longer
 * resolves, say, which would otherwise turn every type into `any` and let everything pass.
 */
function brokenChecker(diagnostics: readonly ts.Diagnostic[]): Error {
  const where = (d: ts.Diagnostic) =>
    d.file === undefined || d.start === undefined
      ? ""
      : `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: `;
  return new Error(
    `the @prelude.so/sdk contract checker is broken:\n${diagnostics.map((d) => `  ${where(d)}${oneLine(d)}`).join("\n")}`,
  );
}

function readEnums(): Record<PreludeEnum, string[]> {
  const names = Object.keys(ENUM_TYPES) as PreludeEnum[];
  const text = [...imports(), ...names.map((n) => `type ${n} = ${ENUM_TYPES[n]};`)].join("\n");
  const { program, file } = compile(text);
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length > 0) throw brokenChecker(diagnostics);
  const checker = program.getTypeChecker();
  const aliases = new Map(file.statements.filter(ts.isTypeAliasDeclaration).map((a) => [a.name.text, a]));
  const out = {} as Record<PreludeEnum, string[]>;
  for (const name of names) {
    const alias = aliases.get(name);
    if (alias === undefined) throw new Error(`no alias for ${name}`);
    const type = checker.getTypeFromTypeNode(alias.type);
    const members = type.isUnion() ? type.types : [type];
    out[name] = members
      .map((t) => {
        if (!t.isStringLiteral()) throw new Error(`${ENUM_TYPES[name]} is not a union of string literals`);
        return t.value;
      })
      // A union's members come in the compiler's order, not the declaration's.
      .sort();
  }
  return out;
}

/** The SDK's string-literal unions, read from its declarations when this module loads. */
export const PRELUDE_ENUMS: Record<PreludeEnum, string[]> = readEnums();

// TypeScript's codes for an unknown property and for missing ones, which the shape walk must not repeat.
const EXCESS_CODES = new Set([2353, 2561]);
const MISSING_CODES = new Set([2739, 2740, 2741]);

function isInside(node: ts.Node, pos: number): boolean {
  return node.getStart() <= pos && pos < node.getEnd();
}

function nodeAt(root: ts.Node, pos: number): ts.Node {
  let found = root;
  const visit = (n: ts.Node): void => {
    if (!isInside(n, pos)) return;
    found = n;
    ts.forEachChild(n, visit);
  };
  ts.forEachChild(root, visit);
  return found;
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

function keyOf(p: ts.PropertyAssignment): string {
  return ts.isStringLiteral(p.name) || ts.isIdentifier(p.name) ? p.name.text : p.name.getText();
}

/** `$.metadata.correlation_id`, `$.channels[1]`: where `node` sits in its sample's value. */
function jsonPath(node: ts.Node): string {
  let path = "";
  for (let n = node; !ts.isVariableDeclaration(n) && !ts.isSourceFile(n); n = n.parent) {
    if (ts.isPropertyAssignment(n)) {
      const key = keyOf(n);
      path = (IDENTIFIER.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`) + path;
    } else if (ts.isArrayLiteralExpression(n.parent)) {
      path = `[${n.parent.elements.indexOf(n as ts.Expression)}]` + path;
    }
  }
  return `$${path}`;
}

interface Finding {
  pos: number;
  path: string;
  kind: "excess" | "missing" | "type";
  message: string;
}

/**
 * Unknown and missing properties of every object literal in `value`. TypeScript reports only the
 * first unknown property of an object, and neither kind once a property of it has a wrong type.
 */
function shapeFindings(value: ts.Expression, checker: ts.TypeChecker): Finding[] {
  const out: Finding[] = [];
  const visit = (n: ts.Node): void => {
    ts.forEachChild(n, visit);
    if (!ts.isObjectLiteralExpression(n)) return;
    const contextual = checker.getContextualType(n);
    if (contextual === undefined) return;
    const type = checker.getNonNullableType(contextual);
    // A union or a record is left to TypeScript's own diagnostics; the SDK's responses have neither.
    if (
      type.isUnion() ||
      !(type.flags & ts.TypeFlags.Object) ||
      checker.getIndexInfosOfType(type).length > 0
    ) {
      return;
    }
    const typeName = checker.typeToString(type, n, ts.TypeFormatFlags.UseFullyQualifiedType);
    const present = new Set<string>();
    for (const p of n.properties) {
      if (!ts.isPropertyAssignment(p)) continue;
      const key = keyOf(p);
      present.add(key);
      if (type.getProperty(key) !== undefined) continue;
      out.push({
        pos: p.getStart(),
        path: jsonPath(p),
        kind: "excess",
        message: `Object literal may only specify known properties, and '${key}' does not exist in type '${typeName}'.`,
      });
    }
    for (const prop of checker.getPropertiesOfType(type)) {
      if (prop.flags & ts.SymbolFlags.Optional || present.has(prop.name)) continue;
      out.push({
        pos: n.getStart(),
        path: jsonPath(n),
        kind: "missing",
        message: `Property '${prop.name}' is missing but required in type '${typeName}'.`,
      });
    }
  };
  visit(value);
  return out;
}

/** `value` as a TypeScript literal, keys bare where they can be (so messages quote `id`, not `"id"`). */
function literal(value: unknown): string {
  // JSON.stringify has no text for undefined; the declaration then refuses it like any other non-value.
  if (value === undefined) return "undefined";
  // What a JSON body can hold, and nothing else (a Date becomes its string, as on the wire).
  return tsText(JSON.parse(JSON.stringify(value)) as unknown);
}

function tsText(json: unknown): string {
  if (Array.isArray(json)) return `[${json.map(tsText).join(", ")}]`;
  if (json === null || typeof json !== "object") return JSON.stringify(json);
  const fields = Object.entries(json).map(
    ([k, v]) => `${IDENTIFIER.test(k) ? k : JSON.stringify(k)}: ${tsText(v)}`,
  );
  return `{ ${fields.join(", ")} }`;
}

/**
 * What @prelude.so/sdk's types would refuse in each sample, as `label: $.path: problem` lines
 * (empty when all conform). One TypeScript program checks the whole batch, each sample on its own
 * line as `const sN: Model = <value>;`: unknown fields, values outside a literal union (the empty
 * string included), missing required fields, `null` and wrong primitive types are all refused.
 */
export function checkPreludeModels(samples: readonly PreludeSample[]): string[] {
  if (samples.length === 0) return [];
  const text = [
    ...imports(),
    ...samples.map((s, i) => `const s${i}: ${s.model} = ${literal(s.value)};`),
  ].join("\n");
  const { program, file } = compile(text);
  const statements = file.statements.filter(ts.isVariableStatement);
  if (statements.length !== samples.length) throw new Error("a sample did not parse as one statement");

  const findings: Finding[][] = samples.map(() => []);
  const outside: ts.Diagnostic[] = [];
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const i =
      d.file === file && d.start !== undefined ? statements.findIndex((s) => isInside(s, d.start!)) : -1;
    if (i < 0 || d.start === undefined) {
      outside.push(d);
      continue;
    }
    const kind = EXCESS_CODES.has(d.code) ? "excess" : MISSING_CODES.has(d.code) ? "missing" : "type";
    findings[i]!.push({
      pos: d.start,
      path: jsonPath(nodeAt(statements[i]!, d.start)),
      kind,
      message: oneLine(d),
    });
  }
  if (outside.length > 0) throw brokenChecker(outside);

  const checker = program.getTypeChecker();
  return samples.flatMap((sample, i) => {
    const own = findings[i]!;
    const reported = new Set(own.map((f) => `${f.kind} ${f.path}`));
    const value = statements[i]!.declarationList.declarations[0]!.initializer!;
    for (const f of shapeFindings(value, checker)) {
      if (!reported.has(`${f.kind} ${f.path}`)) own.push(f);
    }
    return own.sort((a, b) => a.pos - b.pos).map((f) => `${sample.label}: ${f.path}: ${f.message}`);
  });
}
