/**
 * Writing the gateway's answers: a call's outcome as the transcoder and the marker filter would
 * give it (docs/gateway.md#http-markers), an error in its family's body (docs/gateway.md#error-bodies),
 * and the connection closed after a refusal whose body was not read.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { fromBinary, toJson, type Message } from "@bufbuild/protobuf";
import { asMessage } from "./direct.js";
import { toWire, type ErrorDialect, type WireError } from "../errors.js";
import { HTTP_BODY_MARKER, HTTP_STATUS_MARKER, type Outcome } from "../rpc/binding.js";
import { HTTP_BODY_TYPE, type Route } from "./routes.js";

/** Writes the call's answer: its error, its HttpBody as it is, or its proto3 JSON. */
export function answer(res: ServerResponse, route: Route, outcome: Outcome): void {
  if (!outcome.ok) {
    const { error } = outcome;
    send(res, error.httpStatus, JSON.stringify(error.body), "application/json", outcome.headers);
    return;
  }
  const { [HTTP_STATUS_MARKER]: status = "200", [HTTP_BODY_MARKER]: _unused, ...headers } = outcome.headers;
  const code = Number(status);
  if (route.output.typeName === HTTP_BODY_TYPE) {
    // The handler's google.api.HttpBody as it is: its bytes need no trip through proto3 JSON.
    const raw = outcome.response as { contentType?: string; data?: Uint8Array };
    send(
      res,
      code,
      raw.data === undefined
        ? Buffer.alloc(0)
        : Buffer.from(raw.data.buffer, raw.data.byteOffset, raw.data.byteLength),
      raw.contentType !== undefined && raw.contentType !== "" ? raw.contentType : "application/octet-stream",
      headers,
    );
    return;
  }
  const message = route.directAnswer
    ? (asMessage(route.output, outcome.response as object) as unknown as Message)
    : fromBinary(route.output, route.definition.responseSerialize(outcome.response));
  let json = toJson(route.output, message, { useProtoFieldName: true, alwaysEmitImplicit: true });
  if (route.responseBody !== "" && json !== null && typeof json === "object" && !Array.isArray(json)) {
    json = json[route.responseBody] ?? null;
  }
  if (code === 204) send(res, code, "", undefined, headers);
  else send(res, code, JSON.stringify(json), "application/json", headers);
}

/**
 * For an answer given before the request's body was read to its end (too large, unreadable, a
 * path no route takes): `Connection: close`, and the socket is destroyed as soon as the answer is
 * handed to the kernel, so the rest of the body is never read nor waited for. A request whose
 * body was read, or that has none, keeps its connection.
 */
export function closeUnlessRead(req: IncomingMessage, res: ServerResponse): void {
  const declaresBody =
    req.headers["transfer-encoding"] !== undefined ||
    (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
  if (req.complete || !declaresBody) return;
  res.setHeader("connection", "close");
  req.pause();
  res.once("finish", () => {
    req.socket.destroy();
  });
}

export function cleanMessage(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.replace(/^cannot decode message [\w.]+ from JSON: /, "");
}

export function sendError(
  res: ServerResponse,
  dialect: ErrorDialect,
  docsUrl: string,
  err: unknown,
  headers: Readonly<Record<string, string>>,
  requestId = "",
): WireError {
  const wire = toWire(err, dialect, docsUrl, requestId);
  send(res, wire.httpStatus, JSON.stringify(wire.body), "application/json", { ...headers, ...wire.headers });
  return wire;
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string>,
): void {
  send(res, status, JSON.stringify(body), "application/json", headers);
}

export function send(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  contentType: string | undefined,
  headers: Readonly<Record<string, string>>,
): void {
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  if (contentType !== undefined) res.setHeader("content-type", contentType);
  res.statusCode = status;
  res.end(body);
}
