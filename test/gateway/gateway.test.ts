import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type Server,
} from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { create, fromJson, toJson, type DescService, type Message } from "@bufbuild/protobuf";
import { EmptySchema } from "@bufbuild/protobuf/wkt";
import { createGateway, type GatewayDeps } from "../../src/gateway/gateway.js";
import { RingfenceError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import type { Contract } from "../../src/rpc/contract.js";
import {
  bindService,
  type CallContext,
  type ServiceBinding,
  type UnaryHandler,
} from "../../src/rpc/binding.js";
import { buildFixtureContract, messageType, serviceDefinition, serviceType } from "../support/gateway.js";
import { rest, type RestOptions } from "../support/rest.js";

const DOCS = "https://docs.example.test";
const MAX_BODY = 1024;
const V1_HEADERS = { deprecation: "@1" };

interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  body: unknown;
}

/** What a handler received, and the x-api-key header it saw. */
interface Call {
  method: string;
  request: Message;
  apiKey: string | undefined;
}

type Handlers = Record<string, UnaryHandler<Message, Message>>;

function parse(text: string, contentType: string | null | undefined): unknown {
  return text !== "" && (contentType ?? "").startsWith("application/json")
    ? (JSON.parse(text) as unknown)
    : undefined;
}

function v1Error(code: string, message: string) {
  return { code, message, doc_url: `${DOCS}/errors#${code}` };
}

/** Fails the way the request's `kind` asks (FailRequest of both services). */
function fail(request: Message, ctx: CallContext): Promise<Message> {
  const { kind } = request as Message & { kind: string };
  switch (kind) {
    case "account_invalid":
      throw new RingfenceError("account_invalid", "The customer is unknown", { "www-authenticate": "Basic" });
    case "field":
      throw new RingfenceError("bad_request", "The phone number is malformed", {}, { field: "phone_number" });
    case "redis":
      throw new Error("connect ECONNREFUSED 127.0.0.1:6379");
    case "headers-then-fail":
      ctx.setHeader("Cache-Control", "no-store");
      ctx.setHeader("x-http-status", "201");
      throw new RingfenceError("suspended_account", "The account is suspended");
    default:
      throw new TypeError("secret-token-123 cannot be read from db.internal");
  }
}

describe("built-in REST gateway (fixture.echo.v1)", function () {
  let contract: Contract;
  let server: Server;
  let base: string;
  let port: number;
  let ready: boolean | "reject" = true;
  const calls: Call[] = [];
  const logged: { msg: string; fields: Record<string, unknown> | undefined }[] = [];

  function lastCall(): Call {
    const call = calls.at(-1);
    if (call === undefined) throw new Error("no handler was called");
    return call;
  }

  /** One handler per method that answers an Echo of what it received; `overrides` replace some. */
  function echoHandlers(service: DescService, overrides: Handlers): Handlers {
    const echo = messageType(contract, "Echo");
    const handlers: Handlers = {};
    for (const method of service.methods) {
      const override = overrides[method.localName];
      handlers[method.localName] = (request, ctx) => {
        calls.push({ method: method.name, request, apiKey: ctx.header("x-api-key") });
        if (override !== undefined) return override(request, ctx);
        return Promise.resolve(
          fromJson(echo, {
            method: method.name,
            request: toJson(method.input, request, { useProtoFieldName: true }),
            api_key: ctx.header("x-api-key") ?? "",
          }),
        );
      };
    }
    return handlers;
  }

  function bindings(guard?: () => void): ServiceBinding[] {
    const echoService = serviceType(contract, "EchoService");
    const sessionService = serviceType(contract, "SessionEchoService");
    const httpBody = messageType(contract, "google.api.HttpBody");
    const token = messageType(contract, "TokenResponse");
    const echoHandlersV1 = echoHandlers(echoService, {
      createThing: (request, ctx) => {
        ctx.setHeader("x-http-status", "201");
        ctx.setHeader("Location", "/v1/things/created");
        return Promise.resolve(request);
      },
      deleteThing: (_request, ctx) => {
        ctx.setHeader("x-http-status", "204");
        return Promise.resolve(create(EmptySchema));
      },
      exchangeToken: (request) => {
        const { contentType, data } = request as Message & { contentType: string; data: Uint8Array };
        return Promise.resolve(
          fromJson(token, {
            access_token: "at-1",
            token_type: "Bearer",
            expires_in: 3600,
            received_content_type: contentType,
            received_body: Buffer.from(data).toString("utf8"),
          }),
        );
      },
      downloadThing: (request, ctx) => {
        const { id } = request as Message & { id: string };
        ctx.setHeader("content-disposition", `attachment; filename="${id}.csv"`);
        return Promise.resolve(
          fromJson(httpBody, {
            content_type: "text/csv",
            data: Buffer.from(`id\n${id}\n`).toString("base64"),
          }),
        );
      },
      fail,
    });
    return [
      bindService(serviceDefinition(echoService), echoHandlersV1, {
        dialect: "v1",
        headers: V1_HEADERS,
        ...(guard === undefined ? {} : { guard }),
      }),
      bindService(serviceDefinition(sessionService), echoHandlers(sessionService, { fail }), {
        dialect: "session",
      }),
    ];
  }

  function deps(): GatewayDeps {
    return {
      log: {
        ...silentLogger,
        error: (msg, fields) => {
          logged.push({ msg, fields });
        },
      },
      docsUrl: DOCS,
      maxBodyBytes: MAX_BODY,
      contract,
      ready: () =>
        ready === "reject" ? Promise.reject(new Error("Connection is closed.")) : Promise.resolve(ready),
    };
  }

  async function listen(s: Server): Promise<number> {
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    return (s.address() as AddressInfo).port;
  }

  async function close(s: Server): Promise<void> {
    s.closeAllConnections();
    await new Promise<void>((resolve, reject) => {
      s.close((err) => {
        if (err === undefined) resolve();
        else reject(err);
      });
    });
  }

  const get = (path: string, headers?: Record<string, string>) => rest(base).get(path, headers);
  const call = (method: string, path: string, options?: RestOptions) =>
    rest(base).call(method, path, options);
  /** POSTs `body` as JSON; a string is sent as it is (malformed JSON, JSON that is no object). */
  const postJson = (path: string, body: unknown, headers?: Record<string, string>) =>
    call("POST", path, typeof body === "string" ? { raw: body, headers } : { body, headers });

  /** node:http, for what fetch cannot send: raw paths, chunked bodies, no Content-Type. */
  function raw(
    method: string,
    path: string,
    options: { headers?: OutgoingHttpHeaders; chunks?: (string | Buffer)[] } = {},
  ): Promise<RawAnswer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        { host: "127.0.0.1", port, method, path, headers: options.headers ?? {} },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("error", reject);
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text,
              body: parse(text, res.headers["content-type"]),
            });
          });
        },
      );
      req.on("error", reject);
      for (const chunk of options.chunks ?? []) req.write(chunk);
      req.end();
    });
  }

  before(async function () {
    this.timeout(60_000);
    contract = buildFixtureContract();
    server = createGateway(bindings(), deps());
    port = await listen(server);
    base = `http://127.0.0.1:${port}`;
  });

  after(async function () {
    await close(server);
  });

  beforeEach(function () {
    calls.length = 0;
    logged.length = 0;
    ready = true;
  });

  describe("routes and path variables", function () {
    it("fully percent-decodes a single-segment path variable", async function () {
      const answer = await get("/v1/things/%2B1415%20555%2F0");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({ method: "GetThing", request: { id: "+1415 555/0" }, api_key: "" });
    });

    it("takes a literal + in a path variable as it is", async function () {
      const answer = await get("/v1/things/+14155550123");
      expect(answer.body).to.deep.equal({ method: "GetThing", request: { id: "+14155550123" }, api_key: "" });
    });

    it("keeps %2F in a multi-segment path variable and binds the whole matched path", async function () {
      const answer = await get("/v1/shelves/s%2F1/books/b%20c");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({
        method: "GetBook",
        request: { name: "shelves/s%2F1/books/b c" },
        api_key: "",
      });
    });

    it("does not match a multi-segment variable with a missing or extra segment", async function () {
      // V1 answers 400 bad_request for a path no route matches (decisions section 4, revised).
      for (const path of ["/v1/shelves/s1/books", "/v1/shelves/s1/books/b1/extra", "/v1/shelves//books/b1"]) {
        const answer = await get(path);
        expect(answer.status, path).to.equal(400);
        expect(answer.body, path).to.deep.equal(v1Error("bad_request", `no such path: ${path}`));
      }
    });

    it("routes a custom verb and binds the variable before it", async function () {
      const answer = await call("POST", "/v1/things/abc:undelete");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({ method: "UndeleteThing", request: { id: "abc" }, api_key: "" });
    });

    it("does not take a percent-encoded colon for a custom verb", async function () {
      const answer = await call("POST", "/v1/things/abc%3Aundelete");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(
        v1Error("bad_request", "POST is not allowed on /v1/things/abc%3Aundelete"),
      );
      expect(answer.headers.get("allow")).to.equal("GET, DELETE");
    });

    it("serves every additional binding of one rpc", async function () {
      const first = await get("/v1/lookup/a1?name=n");
      expect(first.body).to.deep.equal({
        method: "LookupThing",
        request: { id: "a1", name: "n" },
        api_key: "",
      });
      const second = await get("/v2/lookup/a2");
      expect(second.body).to.deep.equal({ method: "LookupThing", request: { id: "a2" }, api_key: "" });
      const third = await postJson("/v2/lookup", { id: "a3", name: "m" });
      expect(third.body).to.deep.equal({
        method: "LookupThing",
        request: { id: "a3", name: "m" },
        api_key: "",
      });
      expect([first.status, second.status, third.status]).to.deep.equal([200, 200, 200]);
    });

    it("answers only the response_body field of a binding that names one", async function () {
      const answer = await get("/v2/lookup/a4/request?name=n");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({ id: "a4", name: "n" });
    });

    it("passes request headers to the handler", async function () {
      await get("/v1/things/abc", { "X-Api-Key": "key-1" });
      expect(lastCall().apiKey).to.equal("key-1");
    });

    it("answers 400 bad_request for an unknown path, in the V1 dialect under /v1/", async function () {
      const answer = await get("/v1/nothing/here");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", "no such path: /v1/nothing/here"));
    });

    it("answers 404 for an unknown path, in the session dialect elsewhere", async function () {
      const session = await get("/v1/session/nothing");
      expect(session.status).to.equal(404);
      expect(session.body).to.deep.equal({ code: "not_found", message: "no such path: /v1/session/nothing" });
      const other = await get("/nothing");
      expect(other.status).to.equal(404);
      expect(other.body).to.deep.equal({ code: "not_found", message: "no such path: /nothing" });
    });

    it("answers 405 with Allow for a known path and another verb (V1: 400 with Allow)", async function () {
      const answer = await call("PUT", "/v1/things/abc");
      expect(answer.status).to.equal(400);
      expect(answer.headers.get("allow")).to.equal("GET, DELETE");
      expect(answer.body).to.deep.equal(v1Error("bad_request", "PUT is not allowed on /v1/things/abc"));
      const session = await get("/v1/session/echo/fail/x");
      expect(session.status).to.equal(405);
      expect(session.headers.get("allow")).to.equal("POST");
      expect(session.body).to.deep.equal({
        code: "method_not_allowed",
        message: "GET is not allowed on /v1/session/echo/fail/x",
      });
      expect(calls).to.be.empty;
    });

    it("answers 400 for malformed percent-encoding in the path", async function () {
      const answer = await raw("GET", "/v1/things/%ZZ");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(
        v1Error("bad_request", 'malformed percent-encoding in path segment "%ZZ"'),
      );
      expect(calls).to.be.empty;
    });

    it("does not resolve dot segments: they match literally, as in Envoy without normalize_path", async function () {
      const dots = await raw("GET", "/v1/things/..");
      expect(dots.status).to.equal(200);
      expect(dots.body).to.deep.equal({ method: "GetThing", request: { id: ".." }, api_key: "" });
      const traversal = await raw("GET", "/v1/other/../things/abc");
      expect(traversal.body).to.deep.equal(v1Error("bad_request", "no such path: /v1/other/../things/abc"));
    });
  });

  describe("query parameters", function () {
    it("types query parameters by their field: string, int32, bool, enum, repeated and nested", async function () {
      const answer = await get(
        "/v1/things/abc?name=a+b%20c&count=7&enabled=true&color=COLOR_GREEN&tags=a&tags=b" +
          "&nested.value=deep&nested.level=2&display_name=D",
      );
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({
        method: "GetThing",
        request: {
          id: "abc",
          name: "a+b c",
          count: 7,
          enabled: true,
          color: "COLOR_GREEN",
          tags: ["a", "b"],
          nested: { value: "deep", level: 2 },
          display_name: "D",
        },
        api_key: "",
      });
      expect(lastCall().request).to.deep.include({
        id: "abc",
        name: "a+b c",
        count: 7,
        enabled: true,
        color: 2,
        tags: ["a", "b"],
        displayName: "D",
      });
    });

    it("accepts a field's JSON name as a query parameter", async function () {
      const answer = await get("/v1/things/abc?displayName=D");
      expect(answer.body).to.deep.equal({
        method: "GetThing",
        request: { id: "abc", display_name: "D" },
        api_key: "",
      });
    });

    it("percent-decodes query parameter names", async function () {
      const answer = await get("/v1/things/abc?nested%2Evalue=x");
      expect(answer.body).to.deep.equal({
        method: "GetThing",
        request: { id: "abc", nested: { value: "x" } },
        api_key: "",
      });
    });

    it("reads enabled=false as false and sets a proto3 optional field given empty", async function () {
      const answer = await get("/v1/things/abc?enabled=false&note=");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({
        method: "GetThing",
        request: { id: "abc", note: "" },
        api_key: "",
      });
      expect(lastCall().request).to.deep.include({ enabled: false, note: "" });
    });

    it("lets the path variable win over a query parameter of the same name", async function () {
      const answer = await get("/v1/things/abc?id=other");
      expect(answer.body).to.deep.equal({ method: "GetThing", request: { id: "abc" }, api_key: "" });
    });

    it("rejects an unknown query parameter with 400 naming it", async function () {
      const answer = await get("/v1/things/abc?name=x&bogus=1");
      expect(answer.status).to.equal(400);
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.body).to.deep.equal(v1Error("bad_request", "unknown query parameter: bogus"));
      expect(calls).to.be.empty;
    });

    it("rejects an unknown nested query parameter with 400 naming it", async function () {
      const answer = await get("/v1/things/abc?nested.bogus=1");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", "unknown query parameter: nested.bogus"));
    });

    it("rejects a dotted query parameter through a scalar field", async function () {
      const answer = await get("/v1/things/abc?name.value=1");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", "name.value is not a nested field"));
    });

    it("rejects a query parameter that names a message field", async function () {
      const answer = await get("/v1/things/abc?nested=1");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", "nested cannot be set from the URL"));
    });

    it("rejects a non-repeated query parameter given twice", async function () {
      const answer = await get("/v1/things/abc?count=1&count=2");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", "count may be given only once"));
    });

    it("rejects query values of the wrong type with 400 naming the field", async function () {
      const prefix = "cannot decode field fixture.echo.v1.GetThingRequest";
      for (const [query, message] of [
        ["count=abc", `${prefix}.count from JSON: expected number (int32), got "abc"`],
        ["count=1.5", `${prefix}.count from JSON: expected number (int32), got 1.5`],
        ["count=", `${prefix}.count from JSON: expected number (int32), got ""`],
        ["enabled=maybe", `${prefix}.enabled from JSON: expected boolean, got "maybe"`],
      ] as const) {
        const answer = await get(`/v1/things/abc?${query}`);
        expect(answer.status, query).to.equal(400);
        expect(answer.body, query).to.deep.equal(v1Error("bad_request", message));
      }
      expect(calls).to.be.empty;
    });

    it("answers 400 for malformed percent-encoding in the query", async function () {
      const answer = await raw("GET", "/v1/things/abc?name=%ZZ");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(
        v1Error("bad_request", 'malformed percent-encoding in query parameter "name"'),
      );
    });
  });

  describe("request bodies", function () {
    it('maps a whole JSON body to the request with body "*" (JSON or proto names, numbers as strings)', async function () {
      const answer = await postJson("/v1/things", {
        id: "t1",
        name: "thing",
        count: "7",
        enabled: true,
        color: "COLOR_RED",
        tags: ["x"],
        nested: { value: "v", level: 1 },
        note: "n",
        size: 12,
      });
      expect(answer.status).to.equal(201);
      expect(answer.body).to.deep.equal({
        id: "t1",
        name: "thing",
        count: 7,
        enabled: true,
        color: "COLOR_RED",
        tags: ["x"],
        nested: { value: "v", level: 1 },
        note: "n",
        size: "12",
      });
    });

    it('maps a body to the named field with body: "item", and the rest from path and query', async function () {
      const answer = await postJson("/v1/things/t%2F1/items?mode=append", { name: "bolt", quantity: 3 });
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({
        method: "AddItem",
        request: { thing_id: "t/1", item: { name: "bolt", quantity: 3 }, mode: "append" },
        api_key: "",
      });
    });

    it("accepts an empty body as an empty message", async function () {
      const answer = await call("POST", "/v1/things");
      expect(answer.status).to.equal(201);
      expect(answer.body).to.deep.equal({
        id: "",
        name: "",
        count: 0,
        enabled: false,
        color: "COLOR_UNSPECIFIED",
        tags: [],
        size: "0",
      });
    });

    it("reads a body without Content-Type as JSON", async function () {
      const answer = await raw("POST", "/v1/things", { chunks: ['{"id":"t2"}'] });
      expect(answer.status).to.equal(201);
      expect(answer.body).to.include({ id: "t2" });
    });

    it("accepts application/json with parameters and +json media types", async function () {
      for (const type of ["application/json; charset=utf-8", "application/merge-patch+json"]) {
        const answer = await postJson("/v1/things", { id: "t3" }, { "content-type": type });
        expect(answer.status, type).to.equal(201);
      }
    });

    it("rejects a body field of the wrong type with 400 naming it", async function () {
      const prefix = "cannot decode field fixture.echo.v1.Thing";
      for (const [body, message] of [
        [{ count: "abc" }, `${prefix}.count from JSON: expected number (int32), got "abc"`],
        [{ enabled: "abc" }, `${prefix}.enabled from JSON: expected boolean, got "abc"`],
        [{ id: 5 }, `${prefix}.id from JSON: expected string, got 5`],
        [{ tags: "x" }, `${prefix}.tags from JSON: expected Array, got "x"`],
        [
          { nested: { value: 3 } },
          'invalid value for field "nested": cannot decode field fixture.echo.v1.Nested.value from JSON: expected string, got 3',
        ],
      ] as const) {
        const answer = await postJson("/v1/things", body);
        const label = JSON.stringify(body);
        expect(answer.status, label).to.equal(400);
        expect(answer.headers.get("deprecation"), label).to.equal("@1");
        expect(answer.body, label).to.deep.equal(v1Error("bad_request", message));
      }
      expect(calls).to.be.empty;
    });

    it("rejects an unknown body field with 400 naming it", async function () {
      const answer = await postJson("/v1/things", { id: "t", bogus: 1 });
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", 'key "bogus" is unknown'));
    });

    it("rejects an unknown field inside the body field of body: item", async function () {
      const answer = await postJson("/v1/things/t/items", { name: "bolt", colour: "red" });
      expect(answer.status).to.equal(400);
      expect((answer.body as { message: string }).message).to.include("colour");
    });

    it("rejects malformed JSON with 400", async function () {
      const answer = await postJson("/v1/things", '{"id":');
      expect(answer.status).to.equal(400);
      const error = answer.body as { code: string; message: string };
      expect(error.code).to.equal("bad_request");
      expect(error.message).to.match(/^malformed JSON body: /);
    });

    it("rejects a JSON body that is not an object with 400", async function () {
      for (const body of ["[1,2]", "null", '"text"', "42"]) {
        const answer = await postJson("/v1/things", body);
        expect(answer.status, body).to.equal(400);
        expect(answer.body, body).to.deep.equal(v1Error("bad_request", "the JSON body must be an object"));
      }
    });

    it("answers a body that is not JSON with 400 bad_request in V1 (415 elsewhere)", async function () {
      const answer = await call("POST", "/v1/things", {
        raw: "id=t",
        headers: { "content-type": "text/plain" },
      });
      expect(answer.status).to.equal(400);
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.body).to.deep.equal(
        v1Error("bad_request", "Content-Type must be application/json, got text/plain"),
      );
    });

    it("answers 415 in the session dialect with its own code", async function () {
      const answer = await call("POST", "/v1/session/echo/fail/x", {
        raw: "<x/>",
        headers: { "content-type": "application/xml" },
      });
      expect(answer.status).to.equal(415);
      expect(answer.body).to.deep.equal({
        code: "unsupported_media_type",
        message: "Content-Type must be application/json, got application/xml",
      });
    });

    it("accepts a body of exactly maxBodyBytes", async function () {
      const prefix = '{"name":"';
      const body = prefix + "x".repeat(MAX_BODY - prefix.length - 2) + '"}';
      expect(body.length).to.equal(MAX_BODY);
      const answer = await postJson("/v1/things", body);
      expect(answer.status).to.equal(201);
    });

    it("answers a body over maxBodyBytes declared by Content-Length with 400 bad_request in V1 (413 elsewhere)", async function () {
      const answer = await postJson("/v1/things", { name: "x".repeat(MAX_BODY) });
      expect(answer.status).to.equal(400);
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.body).to.deep.equal(v1Error("bad_request", `the body may not exceed ${MAX_BODY} bytes`));
      expect(calls).to.be.empty;
    });

    it("answers a chunked body that grows over maxBodyBytes with 400 bad_request in V1", async function () {
      const chunk = Buffer.from(`"${"x".repeat(400)}",`);
      const answer = await raw("POST", "/v1/things", {
        headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
        chunks: [Buffer.from('{"tags":['), chunk, chunk, chunk, Buffer.from('"y"]}')],
      });
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", `the body may not exceed ${MAX_BODY} bytes`));
      expect(calls).to.be.empty;
    });

    it("answers 413 in the session dialect with its own code", async function () {
      const answer = await postJson("/v1/session/echo/fail/x", { detail: "x".repeat(MAX_BODY) });
      expect(answer.status).to.equal(413);
      expect(answer.body).to.deep.equal({
        code: "payload_too_large",
        message: `the body may not exceed ${MAX_BODY} bytes`,
      });
    });

    it("keeps serving after a body too large", async function () {
      const big = await postJson("/v1/things", { name: "x".repeat(4 * MAX_BODY) });
      expect(big.status).to.equal(400);
      const next = await get("/v1/things/abc");
      expect(next.status).to.equal(200);
    });
  });

  describe("raw bodies (google.api.HttpBody)", function () {
    it("passes a form body raw with its Content-Type to the handler, and answers an ordinary message", async function () {
      const form = "grant_type=client_credentials&scope=a+b%20c";
      const answer = await call("POST", "/v1/token", {
        raw: form,
        headers: { "content-type": "application/x-www-form-urlencoded;charset=UTF-8" },
      });
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({
        access_token: "at-1",
        token_type: "Bearer",
        expires_in: 3600,
        received_content_type: "application/x-www-form-urlencoded;charset=UTF-8",
        received_body: form,
      });
    });

    it("passes binary bytes unchanged and does not check the content type", async function () {
      const bytes = Buffer.from([0, 255, 1, 128, 10, 13]);
      const answer = await call("POST", "/v1/token", {
        raw: bytes,
        headers: { "content-type": "image/png" },
      });
      expect(answer.status).to.equal(200);
      const { contentType, data } = lastCall().request as Message & { contentType: string; data: Uint8Array };
      expect(contentType).to.equal("image/png");
      expect(Buffer.from(data).equals(bytes)).to.be.true;
    });

    it("passes an empty content type when the request has none", async function () {
      const answer = await raw("POST", "/v1/token", { chunks: ["a=1"] });
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.include({ received_content_type: "", received_body: "a=1" });
    });

    it("answers a raw body over maxBodyBytes as too large (V1: 400 bad_request)", async function () {
      const answer = await call("POST", "/v1/token", {
        raw: "a=" + "x".repeat(MAX_BODY),
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("bad_request", `the body may not exceed ${MAX_BODY} bytes`));
    });

    it("answers a google.api.HttpBody response as raw bytes with its content type", async function () {
      const answer = await get("/v1/things/t9/raw");
      expect(answer.status).to.equal(200);
      expect(answer.headers.get("content-type")).to.equal("text/csv");
      expect(answer.headers.get("content-disposition")).to.equal('attachment; filename="t9.csv"');
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.text).to.equal("id\nt9\n");
    });
  });

  describe("answers", function () {
    it("prints implicit fields with their defaults, and leaves unset optional and message fields out", async function () {
      const answer = await postJson("/v1/things", {});
      expect(answer.status).to.equal(201);
      expect(answer.body).to.deep.equal({
        id: "",
        name: "",
        count: 0,
        enabled: false,
        color: "COLOR_UNSPECIFIED",
        tags: [],
        size: "0",
      });
    });

    it("prints a proto3 optional field that is set, even to its default", async function () {
      const answer = await postJson("/v1/things", { note: "" });
      expect(answer.body).to.deep.include({ note: "" });
    });

    it("answers the status a handler sets in x-http-status (201), with its headers and without the marker", async function () {
      const answer = await postJson("/v1/things", { id: "t5" });
      expect(answer.status).to.equal(201);
      expect(answer.headers.get("location")).to.equal("/v1/things/created");
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.headers.get("content-type")).to.equal("application/json");
      expect(answer.headers.has("x-http-status")).to.be.false;
    });

    it("answers 204 with no body and no content type when a handler sets it", async function () {
      const answer = await call("DELETE", "/v1/things/t6");
      expect(answer.status).to.equal(204);
      expect(answer.text).to.equal("");
      expect(answer.headers.has("content-type")).to.be.false;
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.headers.has("x-http-status")).to.be.false;
      expect(lastCall().method).to.equal("DeleteThing");
      expect(toJson(messageType(contract, "DeleteThingRequest"), lastCall().request)).to.deep.equal({
        id: "t6",
      });
    });

    it("adds the binding's headers to every answer", async function () {
      const answer = await get("/v1/things/abc");
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.headers.get("content-type")).to.equal("application/json");
    });
  });

  describe("errors", function () {
    it("maps a RingfenceError to its status and V1 body with doc_url, and keeps the binding's and error's headers", async function () {
      const answer = await get("/v1/fail/account_invalid");
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal(v1Error("account_invalid", "The customer is unknown"));
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.headers.get("www-authenticate")).to.equal("Basic");
      expect(answer.headers.get("content-type")).to.equal("application/json");
    });

    it("maps a RingfenceError to the session body with its details and no doc_url", async function () {
      const answer = await postJson("/v1/session/echo/fail/field", {});
      expect(answer.status).to.equal(400);
      expect(answer.body).to.deep.equal({
        code: "bad_request",
        message: "The phone number is malformed",
        field: "phone_number",
      });
      expect(answer.headers.has("deprecation")).to.be.false;
    });

    it("keeps headers a handler set before failing, but not its success status", async function () {
      const answer = await get("/v1/fail/headers-then-fail");
      expect(answer.status).to.equal(400);
      expect(answer.headers.get("cache-control")).to.equal("no-store");
      expect(answer.headers.has("x-http-status")).to.be.false;
      expect(answer.body).to.deep.equal(v1Error("suspended_account", "The account is suspended"));
    });

    it("answers an unexpected failure 500 internal_server_error with a generic message, and logs it", async function () {
      const answer = await get("/v1/fail/crash");
      expect(answer.status).to.equal(500);
      expect(answer.body).to.deep.equal(v1Error("internal_server_error", "Internal server error"));
      expect(answer.headers.get("deprecation")).to.equal("@1");
      expect(answer.text).not.to.include("secret");
      expect(answer.text).not.to.include("db.internal");
      expect(answer.text).not.to.include("TypeError");
      expect(JSON.stringify(logged)).to.include("secret-token-123");
    });

    it("answers an unexpected failure 500 in the session dialect too", async function () {
      const answer = await postJson("/v1/session/echo/fail/crash", {});
      expect(answer.status).to.equal(500);
      expect(answer.body).to.deep.equal({ code: "internal_server_error", message: "Internal server error" });
    });

    it("answers 503 with Retry-After when Redis is out of reach (V1 code internal_server_error)", async function () {
      const answer = await get("/v1/fail/redis");
      expect(answer.status).to.equal(503);
      expect(answer.headers.get("retry-after")).to.equal("5");
      expect(answer.body).to.deep.equal(
        v1Error("internal_server_error", "The service is temporarily unavailable, try again shortly"),
      );
    });

    it("answers what the binding's guard throws, with the binding's headers", async function () {
      const guarded = createGateway(
        bindings(() => {
          throw new RingfenceError("gone", "V1 has been switched off");
        }),
        deps(),
      );
      const guardedPort = await listen(guarded);
      try {
        const answer = await rest(`http://127.0.0.1:${guardedPort}`).get("/v1/things/abc");
        expect(answer.status).to.equal(410);
        expect(answer.headers.get("deprecation")).to.equal("@1");
        expect(answer.body).to.deep.equal(v1Error("gone", "V1 has been switched off"));
        expect(calls).to.be.empty;
      } finally {
        await close(guarded);
      }
    });
  });

  describe("health", function () {
    it("answers GET /healthz 200", async function () {
      ready = false;
      const answer = await get("/healthz");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({ status: "ok" });
    });

    it("answers GET /readyz 200 when ready", async function () {
      const answer = await get("/readyz");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({ status: "ok" });
    });

    it("answers GET /readyz 503 when deps.ready() resolves false", async function () {
      ready = false;
      const answer = await get("/readyz");
      expect(answer.status).to.equal(503);
      expect(answer.body).to.deep.equal({ status: "unavailable" });
    });

    it("answers GET /readyz 503 when deps.ready() rejects", async function () {
      ready = "reject";
      const answer = await get("/readyz");
      expect(answer.status).to.equal(503);
      expect(answer.body).to.deep.equal({ status: "unavailable" });
    });

    it("answers /healthz only to GET", async function () {
      const answer = await call("POST", "/healthz");
      expect(answer.status).to.equal(404);
    });
  });

  /** Where the gateway's 400 answers do not say which field was wrong. */
  describe("error messages that name the field", function () {
    it("names the field when a message field gets a JSON value that is not an object", async function () {
      // Today the message is just "1": cleanMessage() strips "cannot decode message fixture.echo.v1.Nested from JSON: ".
      const answer = await postJson("/v1/things", { nested: 1 });
      expect(answer.status).to.equal(400);
      expect((answer.body as { message: string }).message).to.include("nested");
    });

    it("names the field when an enum field gets an unknown value", async function () {
      // Today: 'cannot decode enum fixture.echo.v1.Color from JSON: "COLOR_PURPLE"' (the enum type, not the field).
      const query = await get("/v1/things/abc?color=COLOR_PURPLE");
      expect(query.status).to.equal(400);
      expect((query.body as { message: string }).message).to.include("color");
      const posted = await postJson("/v1/things", { color: "COLOR_PURPLE" });
      expect(posted.status).to.equal(400);
      expect((posted.body as { message: string }).message).to.include("color");
    });
  });

  /**
   * Envoy's grpc_json_transcoder (grpc-httpjson-transcoding, path_matcher.h and percent_encoding.h),
   * with the settings of envoy/envoy.yaml (default url_unescape_spec, reject_unknown_query_parameters),
   * answers these requests differently from the built-in gateway today.
   */
  describe("parity with Envoy's transcoder", function () {
    it("keeps RFC 6570 reserved characters percent-encoded in a multi-segment variable", async function () {
      // ALL_CHARACTERS_EXCEPT_RESERVED (the default): only single-segment variables are fully decoded.
      const answer = await get("/v1/shelves/s%2B1/books/b%3A2%20x");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({
        method: "GetBook",
        request: { name: "shelves/s%2B1/books/b%3A2 x" },
        api_key: "",
      });
    });

    it("ignores trailing slashes when matching a path", async function () {
      // ExtractRequestParts drops trailing empty segments.
      const answer = await get("/v1/things/abc/");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({ method: "GetThing", request: { id: "abc" }, api_key: "" });
    });

    it('rejects an unknown query parameter on a body "*" route', async function () {
      // Query bindings are resolved whatever the body rule; an unknown one fails the request.
      const answer = await postJson("/v1/things?bogus=1", {});
      expect(answer.status).to.equal(400);
      expect(calls).to.be.empty;
    });

    it('rejects an unknown query parameter on a google.api.HttpBody body "*" route', async function () {
      const answer = await call("POST", "/v1/token?bogus=1", {
        raw: "grant_type=client_credentials",
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
      expect(answer.status).to.equal(400);
      expect(calls).to.be.empty;
    });

    it("reads an enum query parameter given by number", async function () {
      // The transcoder's converter tries an enum string as a name, then as a number.
      const answer = await get("/v1/things/abc?color=2");
      expect(answer.status).to.equal(200);
      expect(answer.body).to.deep.equal({
        method: "GetThing",
        request: { id: "abc", color: "COLOR_GREEN" },
        api_key: "",
      });
    });

    it("reads the bool spellings 1/0, yes/no and t/f in query values", async function () {
      // The converter (DataPiece::ToBool) reads a bool from a string with safe_strtob, case-insensitive.
      for (const [value, enabled] of [
        ["1", true],
        ["yes", true],
        ["T", true],
        ["0", false],
        ["no", false],
      ] as const) {
        const answer = await get(`/v1/things/abc?enabled=${value}`);
        expect(answer.status, value).to.equal(200);
        expect(lastCall().request, value).to.deep.include({ enabled });
      }
    });
  });
});
