import { readFileSync } from "node:fs";
import {
  ScalarType,
  type DescEnum,
  type DescField,
  type DescFile,
  type DescMessage,
} from "@bufbuild/protobuf";
import type { Contract, HttpBinding, RpcMethod } from "../rpc/contract.js";
import {
  ERRORS,
  OAUTH_ERROR_CODES,
  V1_ERROR_CODES,
  V1_OTHER_CODES,
  V2_ERROR_CODES,
  V2_ERROR_TYPES,
  type ErrorDialect,
} from "../errors.js";
import { handlerName, type DeclaredService } from "../rpc/surface.js";

/**
 * The REST surface as an OpenAPI 3.1 document, built from the same descriptor and
 * `google.api.http` annotations the gateways route by, with the protos' comments as its text.
 * `npm run generate` writes it to openapi/ringfence.yaml; the built-in gateway serves it at
 * `GET /openapi.json`. What the descriptor does not say (who may call, success statuses other
 * than 200, error families, forms) comes from what each domain declares of its services
 * (src/rpc/surface.ts), which their bindings read too.
 */

type Schema = Record<string, unknown>;
type Json = Record<string, unknown>;

/** The security scheme of each kind of caller (src/rpc/callers.ts). */
const SCHEME: Readonly<Record<string, string>> = {
  account: "apiKey",
  session: "sessionToken",
  app: "managementKey",
  provider: "statusToken",
  "whatsapp-verify-token": "whatsappVerifyToken",
  "whatsapp-signature": "whatsappSignature",
};

/** The schema of each error body family (docs/gateway.md#error-bodies). */
const ERROR_SCHEMA: Readonly<Record<ErrorDialect, string>> = {
  v1: "V1Error",
  v2: "V2Error",
  session: "SessionError",
  oauth: "OAuthError",
};

/** An OpenAPI path for an http rule's pattern: `{x=**}` becomes `{x}`. */
function openapiPath(pattern: string): string {
  return pattern.replace(/\{([a-z_][a-z0-9_.]*)(=[^}]*)?\}/g, "{$1}");
}

/** Leading comments of the file's elements by source path (`4,0,2,1`: message 0, field 1). */
function commentsOf(file: DescFile): Map<string, string> {
  const out = new Map<string, string>();
  for (const loc of file.proto.sourceCodeInfo?.location ?? []) {
    // Without buf's lint directives, which are meant for buf, not for readers.
    const text = loc.leadingComments
      .split("\n")
      .filter((line) => !/^\s*buf:lint:ignore\b/.test(line))
      .join("\n")
      .trim();
    if (text !== "") out.set(loc.path.join(","), text.replace(/\n ?/g, "\n").replace(/\n{2,}/g, "\n\n"));
  }
  return out;
}

function messagePath(m: DescMessage): number[] {
  if (m.parent === undefined) return [4, m.file.messages.indexOf(m)];
  return [...messagePath(m.parent), 3, m.parent.nestedMessages.indexOf(m)];
}

export interface DocumentOptions {
  /** The version in info.version (package.json's). */
  version?: string;
}

/** `services`: what the domains declare of the served services; a service they omit declares nothing. */
export function buildDocument(
  contract: Contract,
  services: readonly DeclaredService[],
  options: DocumentOptions = {},
): Json {
  const declared = new Map(services.map((s) => [s.serviceName, s]));
  const comments = new Map<DescFile, Map<string, string>>();
  const commentOf = (file: DescFile, path: number[]) => {
    let c = comments.get(file);
    if (c === undefined) comments.set(file, (c = commentsOf(file)));
    return c.get(path.join(","));
  };
  const schemas: Record<string, Schema> = {};

  const enumSchema = (e: DescEnum): Schema => ({ type: "string", enum: e.values.map((v) => v.name) });

  const scalarSchema = (t: ScalarType): Schema => {
    switch (t) {
      case ScalarType.BOOL:
        return { type: "boolean" };
      case ScalarType.STRING:
        return { type: "string" };
      case ScalarType.BYTES:
        return { type: "string", contentEncoding: "base64" };
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return { type: "number" };
      case ScalarType.INT64:
      case ScalarType.UINT64:
      case ScalarType.SINT64:
      case ScalarType.FIXED64:
      case ScalarType.SFIXED64:
        // The proto3 JSON mapping writes 64-bit integers as strings.
        return { type: "string", format: "int64" };
      default:
        return { type: "integer", format: "int32" };
    }
  };

  /**
   * A message by reference. `printed`: it is part of an answer, where fields without presence are
   * always printed (so required); request messages leave every field optional.
   */
  const messageRef = (m: DescMessage, printed: boolean): Schema => {
    switch (m.typeName) {
      case "google.protobuf.Struct":
        return { type: "object", additionalProperties: true };
      case "google.protobuf.Value":
        return {};
      case "google.protobuf.ListValue":
        return { type: "array", items: {} };
      case "google.protobuf.Timestamp":
        return { type: "string", format: "date-time" };
      case "google.protobuf.Duration":
        return { type: "string", pattern: "^-?\\d+(\\.\\d+)?s$" };
      default:
        if (schemas[m.typeName] === undefined) {
          schemas[m.typeName] = {};
          schemas[m.typeName] = objectSchema(m, new Set(), printed);
        }
        return { $ref: `#/components/schemas/${m.typeName}` };
    }
  };

  const fieldSchema = (f: DescField, printed: boolean): Schema => {
    const described = (s: Schema): Schema => {
      const path = [...messagePath(f.parent), 2, f.parent.fields.indexOf(f)];
      const text = commentOf(f.parent.file, path);
      return text === undefined
        ? s
        : s.$ref !== undefined
          ? { allOf: [s], description: text }
          : { ...s, description: text };
    };
    switch (f.fieldKind) {
      case "scalar":
        return described(scalarSchema(f.scalar));
      case "enum":
        return described(enumSchema(f.enum));
      case "message":
        return described(messageRef(f.message, printed));
      case "list":
        return described({
          type: "array",
          items:
            f.listKind === "scalar"
              ? scalarSchema(f.scalar)
              : f.listKind === "enum"
                ? enumSchema(f.enum)
                : messageRef(f.message, printed),
        });
      case "map":
        return described({
          type: "object",
          additionalProperties:
            f.mapKind === "scalar"
              ? scalarSchema(f.scalar)
              : f.mapKind === "enum"
                ? enumSchema(f.enum)
                : messageRef(f.message, printed),
        });
    }
  };

  /** A message as a JSON object, without the fields in `omit` (bound to the path). */
  const objectSchema = (m: DescMessage, omit: ReadonlySet<string>, printed: boolean): Schema => {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    // Field names as the proto spells them: both gateways print (and read) proto names.
    for (const f of m.fields) {
      if (omit.has(f.name)) continue;
      properties[f.name] = fieldSchema(f, printed);
      if (printed && f.fieldKind !== "message" && !f.proto.proto3Optional) required.push(f.name);
    }
    const text = commentOf(m.file, messagePath(m));
    return {
      type: "object",
      ...(text === undefined ? {} : { description: text }),
      ...(required.length > 0 ? { required } : {}),
      properties,
    };
  };

  const paths: Record<string, Record<string, Json>> = {};
  const methods = [...contract.methods.values()].sort((a, b) => a.path.localeCompare(b.path));
  for (const rpc of methods) {
    rpc.http.forEach((binding, i) => {
      const openapi = openapiPath(binding.pattern);
      const operation = operationOf(rpc, binding, i);
      (paths[openapi] ??= {})[binding.verb.toLowerCase()] = operation;
    });
  }

  function operationOf(rpc: RpcMethod, binding: HttpBinding, index: number): Json {
    const [, service = "", method = ""] = rpc.path.split("/");
    const surface = declared.get(service);
    const handler = handlerName(method);
    const dialect = surface?.dialectOf(handler) ?? "session";
    const short = service.split(".").at(-1) ?? service;
    // From the full service name, package version included: V1 and V2 share service and method
    // names (`lookup_v1_LookupService_LookupPhoneNumber`, `lookup_v2_LookupService_...`).
    const operation = `${service.replace(/^ringfence\./, "").replaceAll(".", "_")}_${method}`;
    const serviceDesc = contract.registry.getService(service);
    const methodDesc = serviceDesc?.methods.find((m) => m.name === method);
    const text =
      serviceDesc === undefined || methodDesc === undefined
        ? undefined
        : commentOf(serviceDesc.file, [
            6,
            serviceDesc.file.services.indexOf(serviceDesc),
            2,
            serviceDesc.methods.indexOf(methodDesc),
          ]);
    const pathNames = [...binding.pattern.matchAll(/\{([a-z_][a-z0-9_.]*)/g)].map((m) => m[1] ?? "");
    const bound = new Set(pathNames);
    const parameters: Json[] = pathNames.map((name) => {
      const field = rpc.input.fields.find((f) => f.name === name);
      return {
        name,
        in: "path",
        required: true,
        schema: field === undefined ? { type: "string" } : fieldSchema(field, false),
      };
    });
    for (const header of surface?.headerParametersOf(handler) ?? []) {
      parameters.push({
        name: header.name,
        in: "header",
        required: true,
        schema: header.schema,
        description: header.description,
      });
    }
    let requestBody: Json | undefined;
    if (binding.body === "") {
      for (const f of rpc.input.fields) {
        if (bound.has(f.name) || f.fieldKind === "map") continue;
        if (f.fieldKind !== "message") {
          parameters.push({ name: f.name, in: "query", required: false, schema: fieldSchema(f, false) });
          continue;
        }
        // A message's scalar fields are set by dotted names, as the transcoder maps `hub.mode`.
        for (const inner of f.message.fields) {
          if (inner.fieldKind !== "scalar" && inner.fieldKind !== "enum") continue;
          parameters.push({
            name: `${f.name}.${inner.name}`,
            in: "query",
            required: false,
            schema: fieldSchema(inner, false),
          });
        }
      }
    } else if (binding.body === "*") {
      requestBody = {
        required: true,
        content: { "application/json": { schema: objectSchema(rpc.input, bound, false) } },
      };
    } else {
      const field = rpc.input.fields.find((f) => f.name === binding.body);
      const httpBody = field?.fieldKind === "message" && field.message.typeName === "google.api.HttpBody";
      const raw = surface?.rawBodyOf(handler);
      requestBody = httpBody
        ? {
            required: true,
            ...(raw === undefined ? {} : { description: raw.description }),
            content:
              raw === undefined
                ? {
                    "application/x-www-form-urlencoded": {
                      schema: surface?.formOf(handler) ?? { type: "object" },
                    },
                  }
                : { [raw.mediaType]: { schema: raw.schema } },
          }
        : {
            required: true,
            content: { "application/json": { schema: field === undefined ? {} : fieldSchema(field, false) } },
          };
    }
    const status: number = surface?.successStatus(handler) ?? 200;
    const answered = surface?.rawAnswerOf(handler);
    const success: Json =
      status === 204
        ? { description: "No content" }
        : rpc.output.typeName === "google.api.HttpBody"
          ? answered === undefined
            ? { description: "Success, with an empty body" }
            : {
                description: answered.description,
                content: { [answered.mediaType]: { schema: answered.schema } },
              }
          : {
              description: "Success",
              content: { "application/json": { schema: messageRef(rpc.output, true) } },
            };
    const family = ERROR_SCHEMA[dialect];
    // A method answering RFC 6749 errors authenticates its client itself, as the token endpoint
    // does (HTTP Basic, or both in the form); V2 takes the API key as a bearer token.
    const kind = surface?.callerKindOf(handler);
    const security =
      dialect === "oauth"
        ? ["clientBasic"]
        : kind === undefined
          ? undefined
          : [dialect === "v2" ? "apiKeyBearer" : schemeOf(kind)];
    return {
      operationId: index === 0 ? operation : `${operation}_${index + 1}`,
      tags: [short],
      ...(text === undefined ? {} : { summary: firstSentence(text), description: text }),
      ...(surface?.deprecated === true ? { deprecated: true } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(requestBody === undefined ? {} : { requestBody }),
      responses: {
        [String(status)]: success,
        default: {
          description: "An error; the body family of the API (see components/schemas)",
          content: { "application/json": { schema: { $ref: `#/components/schemas/${family}` } } },
        },
      },
      security: security === undefined ? [] : security.map((s) => ({ [s]: [] })),
      "x-grpc-method": rpc.path,
    };
  }

  const sortedSchemas = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
  return {
    openapi: "3.1.0",
    info: {
      title: "Ringfence",
      version: options.version ?? packageVersion(),
      description:
        "Phone verification (V2, and V1 deprecated), lookup and session authentication. Generated from the protos' google.api.http annotations by `npm run generate`; the same calls exist over gRPC (see x-grpc-method).",
    },
    // Where the paths are served: the host the document was read from (the built-in gateway serves
    // it at /openapi.json), which behind Envoy is the deployment's ISSUER_URL host; or the built-in
    // gateway on its default HOST and HTTP_PORT.
    servers: [
      {
        url: "/",
        description:
          "The host this document was read from (the built-in gateway's GET /openapi.json); in a deployment, the host of its ISSUER_URL",
      },
      {
        url: "http://127.0.0.1:8080",
        description: "The built-in gateway on its default HOST and HTTP_PORT (`ringfence serve`)",
      },
    ],
    tags: [...new Set(methods.map((m) => m.path.split("/")[1]?.split(".").at(-1) ?? ""))]
      .sort()
      .map((name) => ({ name })),
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b))),
    components: {
      securitySchemes: {
        apiKey: { type: "apiKey", in: "header", name: "x-api-key", description: "A V1 account's API key" },
        apiKeyBearer: { type: "http", scheme: "bearer", description: "An account's API key (V2)" },
        sessionToken: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: "A user's session token",
        },
        managementKey: { type: "http", scheme: "bearer", description: "An app's management API key" },
        statusToken: {
          type: "http",
          scheme: "bearer",
          description: "A delivery provider's status_token (DELIVERY_PROVIDERS)",
        },
        whatsappVerifyToken: {
          type: "apiKey",
          in: "query",
          name: "hub.verify_token",
          description:
            "The verify_token of a WhatsApp entry of DELIVERY_PROVIDERS (Meta's subscription handshake)",
        },
        whatsappSignature: {
          type: "apiKey",
          in: "header",
          name: "X-Hub-Signature-256",
          description:
            "sha256=<hex HMAC-SHA256 of the raw body>, keyed by the app_secret of the WhatsApp entry the body's phone_number_id names",
        },
        clientBasic: {
          type: "http",
          scheme: "basic",
          description: "An OAuth client's client_id and client_secret (or both in the form)",
        },
      },
      schemas: {
        ...sortedSchemas,
        V1Error: {
          type: "object",
          required: ["code", "message", "doc_url"],
          properties: {
            code: { type: "string", enum: [...V1_ERROR_CODES, ...V1_OTHER_CODES] },
            message: { type: "string" },
            doc_url: { type: "string", format: "uri" },
          },
        },
        V2Error: {
          type: "object",
          required: ["code", "message", "type", "request_id"],
          properties: {
            code: { type: "string", enum: [...V2_ERROR_CODES] },
            message: { type: "string" },
            type: { type: "string", enum: [...new Set(Object.values(V2_ERROR_TYPES))] },
            request_id: { type: "string" },
            param: { type: "string", description: "The request field at fault, when one is" },
          },
        },
        SessionError: {
          type: "object",
          required: ["code", "message"],
          properties: {
            code: { type: "string", enum: Object.keys(ERRORS).sort() },
            message: { type: "string" },
            field: { type: "string", description: "The request field at fault, when one is" },
          },
        },
        OAuthError: {
          type: "object",
          required: ["error"],
          properties: {
            error: {
              type: "string",
              enum: [...OAUTH_ERROR_CODES, "server_error", "temporarily_unavailable", "too_many_attempts"],
            },
            error_description: { type: "string" },
          },
        },
      },
    },
  };
}

function schemeOf(kind: string): string {
  const scheme = SCHEME[kind];
  if (scheme === undefined) throw new Error(`no security scheme for the caller kind ${kind}`);
  return scheme;
}

function firstSentence(text: string): string {
  const line = text.split("\n")[0] ?? text;
  const end = line.search(/[.:](\s|$)/);
  return end < 0 ? line : line.slice(0, end);
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version?: unknown;
  };
  return typeof pkg.version === "string" ? pkg.version : "0.0.0";
}
