import { connect, constants } from "node:http2";
import { readFileSync } from "node:fs";
import { expect } from "chai";
import { LuaFactory, type LuaEngine } from "wasmoon";
import { parse } from "yaml";
import { fromBinary, fromJson, toBinary, toJson } from "@bufbuild/protobuf";
import { loadContract } from "../src/rpc/contract.js";
import { startTestApp, type TestApp } from "./support/app.js";
import { rest } from "./support/rest.js";

/**
 * The Lua filter of envoy/envoy.yaml, run by a real Lua VM (wasmoon) against a mock of the
 * Envoy handle API, fed with the gRPC server's real trailers-only answers and with Envoy's own
 * text/plain rejections; what it makes of them must be what the built-in gateway answers.
 */

/** The mock of the handle API the filter uses (headers, body, stream info metadata). */
const HARNESS = `
local function decode(s)
  local t = {}
  for k, v in string.gmatch(s, "([^\\n]*)\\n([^\\n]*)\\n") do t[k] = v end
  return t
end
local function encode(t)
  local out = {}
  for k, v in pairs(t) do out[#out + 1] = k .. "\\n" .. v .. "\\n" end
  table.sort(out)
  return table.concat(out)
end
local function headers_of(t)
  local h = { data = t }
  function h:get(k) return self.data[k] end
  function h:replace(k, v) self.data[k] = v end
  function h:add(k, v) self.data[k] = v end
  function h:remove(k) self.data[k] = nil end
  return h
end
local metadata = { store = {} }
function metadata:set(ns, k, v) self.store[ns] = self.store[ns] or {}; self.store[ns][k] = v end
function metadata:get(ns) return self.store[ns] end
local stream_info = {}
function stream_info:dynamicMetadata() return metadata end
local function handle_of(headers, body)
  local handle = { h = headers_of(headers), b = body }
  function handle:headers() return self.h end
  function handle:streamInfo() return stream_info end
  function handle:body(_always_wrap)
    local outer = self
    local buffer = {}
    function buffer:length() return #outer.b end
    function buffer:getBytes(i, n) return string.sub(outer.b, i + 1, i + n) end
    function buffer:setBytes(s) outer.b = s end
    return buffer
  end
  return handle
end
function run_filter(request_headers, response_headers, response_body)
  metadata.store = {}
  envoy_on_request(handle_of(decode(request_headers), ""))
  local response = handle_of(decode(response_headers), response_body)
  envoy_on_response(response)
  result_headers = encode(response.h.data)
  result_body = response.b
end
`;

/** Envoy's grpc-status to HTTP status (source/common/grpc/status.cc), as the transcoder sets it. */
const GRPC_TO_HTTP: Record<number, number> = { 3: 400, 5: 404, 7: 403, 9: 400, 13: 500, 14: 503, 16: 401 };

interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function encode(headers: Record<string, string>): string {
  return Object.entries(headers)
    .map(([k, v]) => `${k}\n${v}\n`)
    .join("");
}

describe("envoy/envoy.yaml Lua filter, run by a Lua VM", () => {
  let lua: LuaEngine;
  let app: TestApp;
  let customer: { uuid: string; key: string };
  const contract = loadContract();

  before(async () => {
    const config = parse(readFileSync(new URL("../envoy/envoy.yaml", import.meta.url), "utf8")) as {
      static_resources: {
        listeners: { filter_chains: { filters: { typed_config: Record<string, unknown> }[] }[] }[];
      };
    };
    const hcm = config.static_resources.listeners[0]?.filter_chains[0]?.filters[0]?.typed_config as {
      http_filters: { typed_config: { default_source_code?: { inline_string?: string } } }[];
    };
    const source = hcm.http_filters
      .map((f) => f.typed_config.default_source_code?.inline_string)
      .find(Boolean);
    lua = await new LuaFactory().createEngine();
    await lua.doString(source ?? "error('no Lua filter')");
    await lua.doString(HARNESS);
    app = await startTestApp();
    const made = await app.registry.accounts.create({
      name: "Lua",
      balanceMicros: 1_000_000,
      spendingLimitMicros: 1_000_000,
      features: [],
      regions: [],
    });
    customer = { uuid: made.account.customerUuid, key: made.apiKey };
  });
  after(async () => {
    lua.global.close();
    await app.stop();
  });

  /** What the filter makes of a response to a request. */
  async function filter(
    request: Record<string, string>,
    response: Record<string, string>,
    body: string,
  ): Promise<HttpAnswer> {
    lua.global.set("req", encode(request));
    lua.global.set("res", encode(response));
    lua.global.set("body", body);
    await lua.doString("run_filter(req, res, body)");
    const flat = String(lua.global.get("result_headers"));
    const headers: Record<string, string> = {};
    for (const m of flat.matchAll(/([^\n]*)\n([^\n]*)\n/g)) headers[m[1] ?? ""] = m[2] ?? "";
    const { ":status": status = "0", ...rest } = headers;
    return { status: Number(status), headers: rest, body: String(lua.global.get("result_body")) };
  }

  /** A unary gRPC call over raw HTTP/2: the server's answer headers, as Envoy receives them. */
  async function grpcHeaders(path: string, message: Buffer, metadata: Record<string, string>) {
    return (await grpcCall(path, message, metadata)).headers;
  }

  /** A unary gRPC call over raw HTTP/2: its answer headers and its message (when it succeeded). */
  async function grpcCall(
    path: string,
    message: Buffer,
    metadata: Record<string, string>,
  ): Promise<{ headers: Record<string, string>; message: Buffer }> {
    const session = connect(`http://${app.grpcAddress}`);
    try {
      const frame = Buffer.alloc(5 + message.length);
      frame.writeUInt32BE(message.length, 1);
      message.copy(frame, 5);
      const stream = session.request({
        [constants.HTTP2_HEADER_METHOD]: "POST",
        [constants.HTTP2_HEADER_PATH]: path,
        "content-type": "application/grpc",
        te: "trailers",
        ...metadata,
      });
      stream.end(frame);
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      const headers = await new Promise<Record<string, string>>((resolve, reject) => {
        stream.on("response", (h) => {
          resolve(Object.fromEntries(Object.entries(h).map(([k, v]) => [k, String(v)])));
        });
        stream.on("error", reject);
      });
      await new Promise((resolve) => stream.on("close", resolve));
      const data = Buffer.concat(chunks);
      return {
        headers,
        message: data.length >= 5 ? data.subarray(5, 5 + data.readUInt32BE(1)) : Buffer.alloc(0),
      };
    } finally {
      session.close();
    }
  }

  /** The transcoder's view of a trailers-only error: grpc-status mapped to the HTTP status. */
  function transcoded(grpc: Record<string, string>): Record<string, string> {
    const status = GRPC_TO_HTTP[Number(grpc["grpc-status"])] ?? 500;
    return { ...grpc, ":status": String(status), "content-type": "application/json" };
  }

  async function gateway(path: string, headers: Record<string, string>) {
    const { status, text } = await rest(app.baseUrl).get(path, headers);
    return { status, body: text };
  }

  // A LookupPhoneNumberRequest with phone_number "+1555": field 1, length 5.
  const badNumber = Buffer.from([0x0a, 0x05, ...Buffer.from("+1555")]);

  it("turns a V1 trailers-only error into the built-in gateway's answer (400 and the exact body)", async () => {
    const auth = { "customer-uuid": customer.uuid, "x-api-key": customer.key };
    for (const [message, path] of [
      [badNumber, "/v1/lookup/+1555"],
      [Buffer.alloc(0), "/v1/lookup/"],
    ] as const) {
      const grpc = await grpcHeaders("/ringfence.lookup.v1.LookupService/LookupPhoneNumber", message, {
        "x-api-key": "wrong",
        "customer-uuid": customer.uuid,
      });
      expect(grpc).to.have.property("x-http-body");
      const out = await filter({ ":path": path, "content-type": "" }, transcoded(grpc), "");
      const expected = await gateway("/v1/lookup/+1555", { ...auth, "x-api-key": "wrong" });
      expect([out.status, out.body]).to.deep.equal([expected.status, expected.body]);
      expect(out.headers["content-type"]).to.equal("application/json");
      for (const gone of ["x-http-status", "x-http-body", "grpc-status", "grpc-message"]) {
        expect(out.headers, gone).not.to.have.property(gone);
      }
      expect(out.headers.deprecation).to.equal("@1761955200");
    }
    const grpc = await grpcHeaders("/ringfence.lookup.v1.LookupService/LookupPhoneNumber", badNumber, auth);
    const out = await filter({ ":path": "/v1/lookup/+1555" }, transcoded(grpc), "");
    const expected = await gateway("/v1/lookup/+1555", auth);
    expect([out.status, out.body]).to.deep.equal([expected.status, expected.body]);
    expect(JSON.parse(out.body)).to.include({ code: "invalid_phone_number" });
  });

  it("turns a V2 trailers-only error into the built-in gateway's answer (status, type, request id)", async () => {
    const auth = { authorization: `Bearer ${customer.key}`, "x-request-id": "lua-v2-1" };
    const grpc = await grpcHeaders("/ringfence.lookup.v2.LookupService/LookupPhoneNumber", badNumber, auth);
    expect(grpc).to.have.property("x-http-body");
    const out = await filter({ ":path": "/v2/lookup/+1555" }, transcoded(grpc), "");
    const expected = await gateway("/v2/lookup/+1555", auth);
    expect([out.status, out.body]).to.deep.equal([expected.status, expected.body]);
    expect(JSON.parse(out.body)).to.deep.equal({
      code: "invalid_phone_number",
      message: '"+1555" is not a valid E.164 phone number',
      type: "bad_request",
      request_id: "lua-v2-1",
    });
    const wrongKey = { authorization: "Bearer rfk_wrong", "x-request-id": "lua-v2-2" };
    const refused = await grpcHeaders(
      "/ringfence.lookup.v2.LookupService/LookupPhoneNumber",
      badNumber,
      wrongKey,
    );
    const outRefused = await filter({ ":path": "/v2/lookup/+1555" }, transcoded(refused), "");
    const expectedRefused = await gateway("/v2/lookup/+1555", wrongKey);
    expect([outRefused.status, outRefused.body]).to.deep.equal([401, expectedRefused.body]);
    expect(expectedRefused.status).to.equal(401);
  });

  it("turns a session-family trailers-only error into the built-in gateway's answer", async () => {
    const me = await grpcHeaders("/ringfence.session.v1.SessionService/GetMe", Buffer.alloc(0), {});
    const out = await filter({ ":path": "/v1/session/me" }, transcoded(me), "");
    const expected = await gateway("/v1/session/me", {});
    expect([out.status, out.body]).to.deep.equal([expected.status, expected.body]);
    expect(out.status).to.equal(401);
  });

  it("turns a token-endpoint trailers-only error into the RFC 6749 answer of the built-in gateway", async () => {
    const form = "grant_type=client_credentials&client_id=nobody&client_secret=nothing";
    const rpc = contract.methods.get("/ringfence.oauth.v1.OAuthService/CreateToken");
    if (rpc === undefined) throw new Error("no CreateToken");
    const request = toBinary(
      rpc.input,
      fromJson(rpc.input, {
        http_body: {
          content_type: "application/x-www-form-urlencoded",
          data: Buffer.from(form).toString("base64"),
        },
      }),
    );
    const grpc = await grpcHeaders(rpc.path, Buffer.from(request), {});
    const out = await filter({ ":path": "/v1/session/oauth/token" }, transcoded(grpc), "");
    const res = await rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
      form: Object.fromEntries(new URLSearchParams(form)),
    });
    expect([out.status, out.body]).to.deep.equal([res.status, res.text]);
    expect(JSON.parse(out.body)).to.include({ error: "invalid_client" });
    expect(out.headers["www-authenticate"] ?? null).to.equal(res.headers.get("www-authenticate"));
  });

  it("answers a real 201 and 204 as the built-in gateway does, from the success status marker", async () => {
    const made = await app.registry.apps.create("Lua");
    const auth = { authorization: `Bearer ${made.managementApiKey}` };
    const create = contract.methods.get("/ringfence.oauth.v1.OAuthService/CreateClient");
    const remove = contract.methods.get("/ringfence.oauth.v1.OAuthService/DeleteClient");
    if (create === undefined || remove === undefined) throw new Error("no client methods");
    const fields = {
      app_id: made.app.appId,
      client_name: "Lua",
      provider_url: "https://lua.example.com",
      grant_types: ["client_credentials"],
    };
    const encode = (m: typeof create, json: Record<string, unknown>) =>
      Buffer.from(toBinary(m.input, fromJson(m.input, json as never)));
    const created = await grpcCall(create.path, encode(create, fields), auth);
    expect(created.headers["x-http-status"]).to.equal("201");
    // The transcoder prints the message as JSON with the service's print options.
    const json = JSON.stringify(
      toJson(create.output, fromBinary(create.output, created.message), {
        useProtoFieldName: true,
        alwaysEmitImplicit: true,
      }),
    );
    const path = `/v2/session/apps/${made.app.appId}/oauth/clients`;
    const out = await filter(
      { ":path": path },
      { ...created.headers, "content-type": "application/json" },
      json,
    );
    expect(out.status).to.equal(201);
    expect(JSON.parse(out.body)).to.include({ client_name: "Lua" });
    expect(out.headers).not.to.have.property("x-http-status");
    expect(out.headers["cache-control"]).to.equal("no-store");
    const viaGateway = await rest(app.baseUrl).post(path, fields, auth);
    expect(viaGateway.status).to.equal(out.status);

    const clientId = (JSON.parse(out.body) as { client_id: string }).client_id;
    const deleted = await grpcCall(
      remove.path,
      encode(remove, { app_id: made.app.appId, client_id: clientId }),
      auth,
    );
    const gone = await filter(
      { ":path": `${path}/${clientId}` },
      { ...deleted.headers, "content-type": "application/json" },
      "{}",
    );
    const ours = await rest(app.baseUrl).call("DELETE", `${path}/${String(viaGateway.body.client_id)}`, {
      headers: auth,
    });
    expect([gone.status, gone.body]).to.deep.equal([ours.status, ours.text]);
    expect(gone.status).to.equal(204);
  });

  it("wraps Envoy's own text/plain rejections into each family's error body, V1 in 400", async () => {
    const plain = (status: number) => ({ ":status": String(status), "content-type": "text/plain" });
    const v1 = await filter(
      { ":path": "/v1/nothing" },
      plain(404),
      "Could not resolve /v1/nothing to a method.",
    );
    expect(v1.status).to.equal(400);
    expect(JSON.parse(v1.body)).to.deep.equal({
      code: "bad_request",
      message: "Could not resolve /v1/nothing to a method.",
      doc_url: "https://docs.ringfence.dev/errors#bad_request",
    });
    const ours = await gateway("/v1/nothing", {});
    expect([ours.status, (JSON.parse(ours.body) as { code: string }).code]).to.deep.equal([
      400,
      "bad_request",
    ]);

    const session = await filter({ ":path": "/v1/session/nothing" }, plain(404), "Could not resolve");
    expect([session.status, JSON.parse(session.body)]).to.deep.equal([
      404,
      { code: "not_found", message: "Could not resolve" },
    ]);
    // Delivery reports answer the session body, as the built-in gateway does under /v1/delivery/.
    const report = await filter({ ":path": "/v1/delivery/status/alpha/x" }, plain(404), "Could not resolve");
    expect([report.status, JSON.parse(report.body)]).to.deep.equal([
      404,
      { code: "not_found", message: "Could not resolve" },
    ]);
    const reportOurs = await gateway("/v1/delivery/status/alpha/x", {});
    expect([reportOurs.status, Object.keys(JSON.parse(reportOurs.body) as object).sort()]).to.deep.equal([
      404,
      ["code", "message"],
    ]);
    // So does the WhatsApp webhook, under /v1/whatsapp/.
    const webhook = await filter(
      { ":path": "/v1/whatsapp/webhook?hub.x=1" },
      plain(400),
      "unknown parameter",
    );
    expect([webhook.status, JSON.parse(webhook.body)]).to.deep.equal([
      400,
      { code: "bad_request", message: "unknown parameter" },
    ]);
    const webhookOurs = await gateway("/v1/whatsapp/webhook/x", {});
    expect([webhookOurs.status, Object.keys(JSON.parse(webhookOurs.body) as object).sort()]).to.deep.equal([
      404,
      ["code", "message"],
    ]);
    for (const path of [
      "/v1/session/oauth/token",
      "/v1/session/oauth/introspect",
      "/v1/session/oauth/revoke",
    ]) {
      const token = await filter({ ":path": path }, plain(400), "bad body");
      expect([token.status, JSON.parse(token.body)], path).to.deep.equal([
        400,
        { error: "invalid_request", error_description: "bad body" },
      ]);
    }
    const v2 = await filter(
      { ":path": "/v2/verification/nothing?x=1", "x-request-id": "envoy-1" },
      plain(404),
      "Could not resolve",
    );
    expect([v2.status, JSON.parse(v2.body)]).to.deep.equal([
      404,
      { code: "not_found", message: "Could not resolve", type: "not_found", request_id: "envoy-1" },
    ]);
    const ourV2 = await gateway("/v2/verification/nothing", {});
    expect([ourV2.status, (JSON.parse(ourV2.body) as { code: string; type: string }).type]).to.deep.equal([
      404,
      "not_found",
    ]);
    const v2Bad = await filter({ ":path": "/v2/lookup/+33612345678?bogus=1" }, plain(401), "odd");
    expect([v2Bad.status, JSON.parse(v2Bad.body)]).to.deep.equal([
      400,
      { code: "invalid_request", message: "odd", type: "bad_request", request_id: "" },
    ]);
    const v2Down = await filter({ ":path": "/v2/verification" }, plain(502), "upstream reset");
    expect([v2Down.status, (JSON.parse(v2Down.body) as { code: string }).code]).to.deep.equal([
      500,
      "internal",
    ]);
    const down = await filter({ ":path": "/v1/retry" }, plain(503), "upstream connect error");
    expect(down.status).to.equal(503);
    expect(JSON.parse(down.body)).to.include({ code: "internal_server_error" });
  });

  it("leaves a success and native gRPC calls alone, and empties a 204", async () => {
    const ok = await filter(
      { ":path": "/v1/lookup/+33612345678" },
      { ":status": "200", "content-type": "application/json" },
      "{}",
    );
    expect([ok.status, ok.body]).to.deep.equal([200, "{}"]);
    const native = await filter(
      { ":path": "/ringfence.lookup.v1.LookupService/LookupPhoneNumber", "content-type": "application/grpc" },
      { ":status": "200", "x-http-status": "400", "x-http-body": "{}" },
      "",
    );
    expect(native.headers).to.have.property("x-http-status");
    const noContent = await filter(
      { ":path": "/v1/session/logout" },
      { ":status": "200", "x-http-status": "204", "content-type": "application/json" },
      "{}",
    );
    expect([noContent.status, noContent.body, noContent.headers["content-type"]]).to.deep.equal([
      204,
      "",
      undefined,
    ]);
  });
});
