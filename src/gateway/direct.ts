import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/**
 * Shortcuts of the gateway's transcoding for the messages where the long way (ts-proto binary,
 * then @bufbuild reflection) adds nothing but work: the same message and the same JSON, by a
 * shorter road. Each is chosen once per route; a message outside them takes the long way.
 */

/** The 64-bit integers, numbers in ts-proto's objects and strings in proto3 JSON. */
const WIDE = new Set([
  ScalarType.INT64,
  ScalarType.UINT64,
  ScalarType.SINT64,
  ScalarType.FIXED64,
  ScalarType.SFIXED64,
]);

/**
 * Whether a ts-proto object of `desc` is, with its `$typeName`s added, the @bufbuild message of
 * the same value: every field a singular or repeated scalar (not a 64-bit integer, which ts-proto
 * keeps as a number; not a float, which the binary trip rounds to 32 bits), an enum, or a message
 * that is such a message itself (no map, no oneof, no well-known type).
 */
export function sameShape(desc: DescMessage, seen = new Set<string>()): boolean {
  if (desc.typeName.startsWith("google.")) return false;
  if (seen.has(desc.typeName)) return true;
  seen.add(desc.typeName);
  return desc.fields.every((field) => fieldSameShape(field, seen));
}

function fieldSameShape(field: DescField, seen: Set<string>): boolean {
  if (field.oneof !== undefined) return false;
  switch (field.fieldKind) {
    case "scalar":
      return scalarSameShape(field.scalar);
    case "enum":
      return true;
    case "message":
      return sameShape(field.message, seen);
    case "list":
      if (field.listKind === "scalar") return scalarSameShape(field.scalar);
      return field.listKind === "enum" || sameShape(field.message, seen);
    case "map":
      return false;
  }
}

function scalarSameShape(scalar: ScalarType): boolean {
  return !WIDE.has(scalar) && scalar !== ScalarType.FLOAT;
}

/**
 * The @bufbuild message of a ts-proto object of `desc`, for a type `sameShape` accepts: the
 * object with `$typeName` on it and on every message inside it. Answers what `fromBinary` of its
 * ts-proto encoding would, for the well-typed objects handlers return.
 */
export function asMessage(desc: DescMessage, value: object): Record<string, unknown> {
  const out: Record<string, unknown> = { $typeName: desc.typeName, ...value };
  for (const field of desc.fields) {
    if (field.fieldKind === "message") {
      const inner = out[field.localName];
      if (inner !== undefined && inner !== null) out[field.localName] = asMessage(field.message, inner);
    } else if (field.fieldKind === "list" && field.listKind === "message") {
      const items = out[field.localName];
      if (Array.isArray(items)) out[field.localName] = items.map((v: object) => asMessage(field.message, v));
    }
  }
  return out;
}

/** The field of `input` a route's `body` names when it is a google.api.HttpBody; undefined otherwise. */
export function httpBodyField(input: DescMessage, body: string): DescField | undefined {
  const field = input.fields.find((f) => f.name === body);
  return field?.fieldKind === "message" && field.message.typeName === "google.api.HttpBody"
    ? field
    : undefined;
}

/**
 * The binary request whose only field is `field`, a google.api.HttpBody of `contentType` and
 * `data`: what the transcoder makes of a request to a route whose body is that field, when no
 * path variable or query parameter sets another. Empty members are left out, as proto3 does.
 */
export function httpBodyRequest(field: DescField, contentType: string, data: Uint8Array): Uint8Array {
  const inner = new BinaryWriter();
  if (contentType !== "") inner.tag(1, WireType.LengthDelimited).string(contentType);
  if (data.byteLength > 0) inner.tag(2, WireType.LengthDelimited).bytes(data);
  return new BinaryWriter().tag(field.number, WireType.LengthDelimited).bytes(inner.finish()).finish();
}
