/**
 * google.api.http path templates (google/api/http.proto, "Path template syntax"):
 *   Template = "/" Segments [ Verb ] ; Segment = "*" | "**" | LITERAL | Variable ;
 *   Variable = "{" FieldPath [ "=" Segments ] "}" ; Verb = ":" LITERAL .
 */

import { quote } from "../errors.js";

type Segment = { kind: "literal"; value: string } | { kind: "any" } | { kind: "rest" };

interface Variable {
  field: string;
  /** Index of its first segment, and one past its last. */
  from: number;
  to: number;
}

export interface PathTemplate {
  source: string;
  segments: Segment[];
  variables: Variable[];
  verb: string | undefined;
}

export function parseTemplate(source: string): PathTemplate {
  if (!source.startsWith("/")) throw new Error(`path template must start with "/": ${source}`);
  let body = source.slice(1);
  let verb: string | undefined;
  const lastSlash = body.lastIndexOf("/");
  const colon = body.indexOf(":", lastSlash + 1);
  if (colon >= 0 && !body.slice(colon).includes("}")) {
    verb = body.slice(colon + 1);
    body = body.slice(0, colon);
  }
  const segments: Segment[] = [];
  const variables: Variable[] = [];
  for (const token of splitOutsideBraces(body)) {
    if (token.startsWith("{")) {
      if (!token.endsWith("}")) throw new Error(`unclosed variable in ${source}`);
      const [field, pattern = "*"] = token.slice(1, -1).split("=", 2) as [string, string?];
      if (!/^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$/.test(field)) throw new Error(`bad field path ${field}`);
      const from = segments.length;
      for (const part of pattern.split("/")) segments.push(segment(part));
      variables.push({ field, from, to: segments.length });
    } else {
      segments.push(segment(token));
    }
  }
  return { source, segments, variables, verb };
}

function segment(token: string): Segment {
  if (token === "*") return { kind: "any" };
  if (token === "**") return { kind: "rest" };
  if (token === "" || /[{}=]/.test(token)) throw new Error(`bad path segment "${token}"`);
  return { kind: "literal", value: token };
}

function splitOutsideBraces(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = "";
  for (const c of s) {
    if (c === "{") depth++;
    if (c === "}") depth--;
    if (c === "/" && depth === 0) {
      out.push(current);
      current = "";
    } else current += c;
  }
  out.push(current);
  return out;
}

export class BadPathEncoding extends Error {}

/**
 * Matches a raw (still percent-encoded) request path. Single-segment variables are fully
 * unescaped; multi-segment ones keep `%2F`, as Envoy's transcoder does.
 * Returns the variables by field path, or undefined when the path does not match; throws
 * BadPathEncoding when it matches but a variable is not valid percent-encoding.
 */
export function matchTemplate(tpl: PathTemplate, rawPath: string): Map<string, string> | undefined {
  if (!rawPath.startsWith("/")) return undefined;
  const parts = rawPath.slice(1).split("/");
  // Like Envoy, trailing empty segments (`/things/abc/`) do not count.
  while (parts.length > 1 && parts[parts.length - 1] === "") parts.pop();
  if (tpl.verb !== undefined) {
    const last = parts.length - 1;
    const suffix = `:${tpl.verb}`;
    if (!parts[last]?.endsWith(suffix)) return undefined;
    parts[last] = parts[last].slice(0, -suffix.length);
  }
  const spans = matchFrom(tpl.segments, 0, parts, 0);
  if (spans === undefined) return undefined;
  const vars = new Map<string, string>();
  for (const v of tpl.variables) {
    const start = spans[v.from] ?? parts.length;
    const end = spans[v.to] ?? parts.length;
    const raw = parts.slice(start, end);
    const single = v.to - v.from === 1 && tpl.segments[v.from]?.kind === "any";
    vars.set(v.field, single ? unescape(raw.join("/")) : raw.map(unescapeUnreserved).join("/"));
  }
  return vars;
}

/** spans[i] is the index in `parts` where template segment i starts (spans[n] = end). */
function matchFrom(segs: Segment[], si: number, parts: string[], pi: number): number[] | undefined {
  if (si === segs.length) return pi === parts.length ? [pi] : undefined;
  const seg = segs[si];
  if (seg === undefined) return undefined;
  if (seg.kind === "rest") {
    for (let end = parts.length; end >= pi; end--) {
      const rest = matchFrom(segs, si + 1, parts, end);
      if (rest !== undefined) return [pi, ...rest];
    }
    return undefined;
  }
  const part = parts[pi];
  if (part === undefined || part === "") return undefined;
  if (seg.kind === "literal" && safeUnescape(part) !== seg.value) return undefined;
  const rest = matchFrom(segs, si + 1, parts, pi + 1);
  return rest === undefined ? undefined : [pi, ...rest];
}

function safeUnescape(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/** RFC 6570 reserved characters, which stay percent-encoded in multi-segment variables. */
const RESERVED = new Set(Array.from("+:/?#@!$&'()*,;=[]", (c) => c.charCodeAt(0)));

/** Decodes a segment of a multi-segment variable as Envoy does: reserved characters stay encoded. */
function unescapeUnreserved(s: string): string {
  return s.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    let out = "";
    let pending = "";
    for (let i = 0; i < run.length; i += 3) {
      const escape = run.slice(i, i + 3);
      if (RESERVED.has(parseInt(escape.slice(1), 16))) {
        out += unescape(pending) + escape;
        pending = "";
      } else pending += escape;
    }
    return out + unescape(pending);
  });
}

function unescape(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new BadPathEncoding(`malformed percent-encoding in path segment ${quote(s)}`);
  }
}
