import { expect } from "chai";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { Validator } from "@seriousme/openapi-schema-validator";
import { OPENAPI_PATH, renderYaml } from "../../src/openapi/generate.js";
import { loadContract } from "../../src/rpc/contract.js";
import { SERVICES } from "../../src/surfaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components: { schemas: Record<string, unknown> };
};

const committed = () => readFileSync(OPENAPI_PATH, "utf8");

/** `GET /v1/lookup/{phone_number}` rows of docs/gateway.md's route table. */
function documentedRoutes(): { verb: string; path: string; rpc: string }[] {
  const text = readFileSync(new URL("../../docs/gateway.md", import.meta.url), "utf8");
  return [...text.matchAll(/^\| `(GET|POST|PUT|PATCH|DELETE) (\S+)`\s*\| `([^`]+)`/gm)].map((m) => ({
    verb: m[1] ?? "",
    path: m[2] ?? "",
    rpc: m[3] ?? "",
  }));
}

describe("OpenAPI document (openapi/ringfence.yaml)", () => {
  it("matches the protos (run `npm run generate` when this fails)", () => {
    expect(committed()).to.equal(renderYaml(SERVICES));
  });

  it("is a valid OpenAPI 3.1 document, by @seriousme/openapi-schema-validator", async () => {
    const validator = new Validator();
    const result = await validator.validate(committed());
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 1)).to.deep.equal([]);
    expect(result.valid).to.equal(true);
    expect(validator.version).to.equal("3.1");
  });

  it("lists every REST path and verb of the annotations and of docs/gateway.md, with its gRPC method", () => {
    const doc = parse(committed()) as Doc;
    const expected = new Set<string>();
    for (const m of loadContract().methods.values()) {
      for (const b of m.http) expected.add(`${b.verb} ${b.pattern} ${m.path}`);
    }
    const documented = documentedRoutes();
    expect(documented.length).to.be.at.least(22);
    for (const r of documented)
      expect(expected, `${r.verb} ${r.path}`).to.include(`${r.verb} ${r.path} /${r.rpc}`);
    const listed = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [verb, op] of Object.entries(ops))
        listed.add(`${verb.toUpperCase()} ${path} ${String(op["x-grpc-method"])}`);
    }
    expect([...listed].sort()).to.deep.equal([...expected].sort());
  });

  it("gives every operation an operationId of its own, the V1 and V2 lookups included", () => {
    const doc = parse(committed()) as Doc;
    const ids: string[] = [];
    for (const ops of Object.values(doc.paths)) {
      for (const op of Object.values(ops)) ids.push(String(op.operationId));
    }
    const repeated = ids.filter((id, i) => ids.indexOf(id) !== i);
    expect(repeated, "operationIds used more than once").to.deep.equal([]);
    expect(ids).to.include.members([
      "lookup_v1_LookupService_LookupPhoneNumber",
      "lookup_v2_LookupService_LookupPhoneNumber",
    ]);
  });

  it("lists the servers the paths are served by: relative to the document, and the built-in gateway's default", () => {
    const doc = parse(committed()) as Doc & { servers?: { url: string; description?: string }[] };
    expect(doc.servers?.map((s) => s.url)).to.deep.equal(["/", "http://127.0.0.1:8080"]);
    for (const server of doc.servers ?? [])
      expect(server.description, server.url).to.be.a("string").and.not.empty;
  });

  it("describes the V1 calls as deprecated with the V1 error body, and the statuses other than 200", () => {
    const doc = parse(committed()) as Doc;
    const send = doc.paths["/v1/authentication"]?.post;
    expect(send?.deprecated).to.equal(true);
    expect(JSON.stringify(send?.responses)).to.include("#/components/schemas/V1Error");
    expect(send?.security).to.deep.equal([{ apiKey: [] }]);
    const logout = doc.paths["/v1/session/logout"]?.post;
    expect(Object.keys(logout?.responses as object)).to.deep.equal(["204", "default"]);
    expect(logout?.deprecated).to.equal(undefined);
    const token = doc.paths["/v1/session/oauth/token"]?.post;
    expect(JSON.stringify(token?.requestBody)).to.include("application/x-www-form-urlencoded");
    expect(JSON.stringify(token?.responses)).to.include("#/components/schemas/OAuthError");
    const lookup = doc.paths["/v1/lookup/{phone_number}"]?.get;
    expect(lookup?.parameters).to.deep.include({
      name: "customer-uuid",
      in: "header",
      required: true,
      schema: { type: "string", format: "uuid" },
      description: "The account's customer_uuid",
    });
    // Proto field names, as both gateways print them; comments as descriptions.
    const created = doc.components.schemas["ringfence.verify.v1.CreateAuthenticationResponse"] as {
      properties: Record<string, { description?: string }>;
      required: string[];
    };
    expect(created.required).to.include("authentication_uuid");
    expect(created.properties.authentication_uuid?.description).to.be.a("string").and.not.empty;
  });

  describe("served by the built-in gateway", () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp();
    });
    after(async () => {
      await app.stop();
    });

    it("answers GET /openapi.json with the same document as JSON", async () => {
      const res = await fetch(`${app.baseUrl}/openapi.json`);
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.match(/^application\/json/);
      expect(res.headers.get("x-request-id")).to.be.a("string");
      expect(await res.json()).to.deep.equal(parse(committed()));
    });

    it("answers a path no route takes with the V2 body in every V2 area the domains declare, and only there", async () => {
      const areas = SERVICES.flatMap((s) => s.v2Areas);
      expect(areas).to.not.be.empty;
      for (const path of [...areas.map((a) => `/v2/${a}/no-such-path`), ...areas.map((a) => `/v2/${a}`)]) {
        const res = await fetch(`${app.baseUrl}${path}`, { method: "PUT" });
        const body = (await res.json()) as Record<string, unknown>;
        expect(Object.keys(body).sort(), path).to.deep.equal(["code", "message", "request_id", "type"]);
      }
      const outside = await fetch(`${app.baseUrl}/v2/${areas[0] ?? ""}x/no-such-path`, { method: "PUT" });
      expect(Object.keys((await outside.json()) as object).sort()).to.deep.equal(["code", "message"]);
    });
  });
});
