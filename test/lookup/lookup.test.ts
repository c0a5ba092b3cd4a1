import { expect } from "chai";
import { status } from "@grpc/grpc-js";
import { GrpcReflection } from "grpc-js-reflection-client";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { V1_DEPRECATION, V1_SUNSET } from "../../src/v1/deprecation.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { rest, type RestAnswer } from "../support/rest.js";

const FR_MOBILE = "+33612345678";

interface Customer {
  uuid: string;
  key: string;
}

describe("V1 lookup", () => {
  let app: TestApp;
  let customer: Customer;
  let cnamCustomer: Customer;
  let frOnly: Customer;

  async function newCustomer(opts: { features?: "cnam"[]; regions?: string[] } = {}): Promise<Customer> {
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Test",
      balanceMicros: 10_000_000,
      spendingLimitMicros: 100_000_000,
      features: opts.features ?? [],
      regions: opts.regions ?? [],
    });
    return { uuid: account.customerUuid, key: apiKey };
  }

  before(async () => {
    app = await startTestApp();
    customer = await newCustomer();
    cnamCustomer = await newCustomer({ features: ["cnam"] });
    frOnly = await newCustomer({ regions: ["FR"] });
    await app.registry.lookupData.put(
      new Map([[FR_MOBILE, { callerName: "Jeanne Martin", numberPorted: true }]]),
    );
  });
  after(async () => {
    await app.stop();
  });

  function get(
    path: string,
    who: Customer | Record<string, string> = customer,
    options: { method?: string; raw?: string } = {},
  ) {
    const headers = "uuid" in who ? { "customer-uuid": who.uuid, "x-api-key": who.key } : who;
    return rest(app.baseUrl).call(options.method ?? "GET", path, { headers, raw: options.raw });
  }

  function expectDeprecationHeaders(res: RestAnswer) {
    expect(res.headers.get("deprecation")).to.equal(V1_DEPRECATION);
    expect(res.headers.get("sunset")).to.equal(V1_SUNSET);
    // The successor: the V2 lookup of the same number, or the V2 lookup path on an error.
    expect(res.headers.get("link")).to.match(/^<\/v2\/lookup(\/\+\d+)?>; rel="successor-version"$/);
    if (res.status === 200) {
      const number = (JSON.parse(res.text) as { phone_number: string }).phone_number;
      expect(res.headers.get("link")).to.equal(`</v2/lookup/${number}>; rel="successor-version"`);
    }
  }

  function expectV1Error(res: RestAnswer, httpStatus: number, code: string) {
    expect(res.status).to.equal(httpStatus);
    expect(res.headers.get("content-type")).to.equal("application/json");
    expectDeprecationHeaders(res);
    const { body } = res;
    expect(Object.keys(body).sort()).to.deep.equal(["code", "doc_url", "message"]);
    expect(body.code).to.equal(code);
    expect(body.message).to.be.a("string").and.not.empty;
    expect(body.doc_url).to.equal(`${app.config.DOCS_URL}/errors#${code}`);
    return body as { code: string; message: string; doc_url: string };
  }

  describe("over REST", () => {
    it("describes +33612345678 as a French mobile with a carrier and mcc 208, with deprecation headers", async () => {
      const res = await get(`/v1/lookup/${FR_MOBILE}`);
      expect(res.status).to.equal(200);
      expectDeprecationHeaders(res);
      const body = res.body;
      expect(body).to.include({
        phone_number: FR_MOBILE,
        country_code: "FR",
        line_type: "Mobile",
        mcc: "208",
        number_ported: true,
        temporary_phone_number: false,
      });
      expect(body.carrier).to.be.a("string").and.not.empty;
      expect(body).to.have.property("mnc").that.is.a("string");
      expect(body, "caller_name only with the cnam feature and type=cnam").not.to.have.property(
        "caller_name",
      );
    });

    it("reads a percent-encoded + in the path as the same number", async () => {
      const res = await get(`/v1/lookup/%2B33612345678`);
      expect(res.status).to.equal(200);
      expect((res.body as { phone_number: string }).phone_number).to.equal(FR_MOBILE);
    });

    it("returns 400 invalid_phone_number with the V1 error body for +1555", async () => {
      const body = expectV1Error(await get("/v1/lookup/+1555"), 400, "invalid_phone_number");
      expect(body.message).to.include("+1555");
    });

    it("refuses numbers that are not strict E.164 with invalid_phone_number", async () => {
      for (const n of [
        "33612345678",
        "0612345678",
        "+33%206%2012",
        "+33abc",
        "%2B" + "1".repeat(40),
        "..%2F..%2Fetc",
      ]) {
        const res = await get(`/v1/lookup/${n}`);
        expectV1Error(res, 400, "invalid_phone_number");
      }
    });

    it("returns caller_name when the account has cnam and asks type=cnam", async () => {
      const res = await get(`/v1/lookup/${FR_MOBILE}?type=cnam`, cnamCustomer);
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ caller_name: "Jeanne Martin" });
    });

    it("leaves caller_name out when the account lacks the cnam feature, even with type=cnam", async () => {
      const res = await get(`/v1/lookup/${FR_MOBILE}?type=cnam`);
      expect(res.status).to.equal(200);
      expect(res.body).not.to.have.property("caller_name");
    });

    it("leaves caller_name out when cnam is not requested", async () => {
      const res = await get(`/v1/lookup/${FR_MOBILE}`, cnamCustomer);
      expect(res.body).not.to.have.property("caller_name");
    });

    it("refuses an unknown type value with bad_request naming it", async () => {
      const body = expectV1Error(await get(`/v1/lookup/${FR_MOBILE}?type=cnam&type=sms`), 400, "bad_request");
      expect(body.message).to.include("sms");
    });

    it("refuses an unknown query parameter with bad_request naming it", async () => {
      const body = expectV1Error(await get(`/v1/lookup/${FR_MOBILE}?format=xml`), 400, "bad_request");
      expect(body.message).to.include("format");
    });

    it("returns 400 account_invalid for an unknown customer", async () => {
      expectV1Error(
        await get(`/v1/lookup/${FR_MOBILE}`, {
          uuid: "6f1c1f3e-4f0b-4d8e-9a57-2f1f0c5a9b10",
          key: customer.key,
        }),
        400,
        "account_invalid",
      );
    });

    it("returns 400 account_invalid for another customer's key", async () => {
      expectV1Error(
        await get(`/v1/lookup/${FR_MOBILE}`, { uuid: customer.uuid, key: cnamCustomer.key }),
        400,
        "account_invalid",
      );
    });

    it("returns 400 account_invalid without x-api-key, without customer-uuid, or with a malformed uuid", async () => {
      expectV1Error(
        await get(`/v1/lookup/${FR_MOBILE}`, { "customer-uuid": customer.uuid }),
        400,
        "account_invalid",
      );
      expectV1Error(
        await get(`/v1/lookup/${FR_MOBILE}`, { "x-api-key": customer.key }),
        400,
        "account_invalid",
      );
      expectV1Error(
        await get(`/v1/lookup/${FR_MOBILE}`, { "customer-uuid": "not-a-uuid", "x-api-key": customer.key }),
        400,
        "account_invalid",
      );
    });

    it("checks the caller before the number, so an unauthenticated caller learns nothing", async () => {
      expectV1Error(await get(`/v1/lookup/+1555`, { "x-api-key": "nope" }), 400, "account_invalid");
    });

    it("returns 400 suspended_account while the account is suspended, and serves it again once resumed", async () => {
      const c = await newCustomer();
      await app.registry.accounts.setStatus(c.uuid, "suspended");
      expectV1Error(await get(`/v1/lookup/${FR_MOBILE}`, c), 400, "suspended_account");
      await app.registry.accounts.setStatus(c.uuid, "active");
      expect((await get(`/v1/lookup/${FR_MOBILE}`, c)).status).to.equal(200);
    });

    it("returns 400 unsupported_region for a number outside the account's regions", async () => {
      expect((await get(`/v1/lookup/${FR_MOBILE}`, frOnly)).status).to.equal(200);
      const body = expectV1Error(await get(`/v1/lookup/+14155552671`, frOnly), 400, "unsupported_region");
      expect(body.message).to.include("US");
    });

    it("answers strange paths, methods and bodies with 400 bad_request naming what was wrong", async () => {
      expectV1Error(await get("/v1/lookup/%ZZ"), 400, "bad_request");
      // No route: no V1 service answers, so no deprecation headers, but the V1 body and status.
      for (const path of ["/v1/lookup/", "/v1/lookup", `/v1/lookup/${FR_MOBILE}/extra`, "/v1/nothing"]) {
        const res = await get(path);
        const body = res.body;
        expect([res.status, body.code], path).to.deep.equal([400, "bad_request"]);
        expect(body.message, path).to.include("no such path");
      }
      const res = await get(`/v1/lookup/${FR_MOBILE}`, customer, { method: "POST", raw: "{}" });
      expect(res.headers.get("allow")).to.equal("GET");
      const body = res.body;
      expect([res.status, body.code]).to.deep.equal([400, "bad_request"]);
      expect(body.message).to.include("POST is not allowed");
    });

    it("refuses an oversized request body with 400 bad_request", async () => {
      const raw = await rawRequest(
        app.baseUrl,
        `GET /v1/lookup/${FR_MOBILE}`,
        "x".repeat(app.config.MAX_BODY_BYTES + 1),
      );
      expect(raw).to.match(/^HTTP\/1\.1 400 /);
      expect(raw).to.include('"code":"bad_request"');
      expect(raw).to.include("the body may not exceed");
    });

    it("serves /healthz and /readyz", async () => {
      expect((await rest(app.baseUrl).get("/healthz")).status).to.equal(200);
      const ready = await rest(app.baseUrl).get("/readyz");
      expect(ready.status).to.equal(200);
      expect(ready.body).to.deep.equal({ status: "ok" });
    });
  });

  describe("over gRPC", () => {
    let client: LookupServiceClient;
    before(() => {
      client = new LookupServiceClient(app.grpcAddress, insecure);
    });
    after(() => {
      client.close();
    });

    const auth = (c: Customer) => metadata({ "customer-uuid": c.uuid, "x-api-key": c.key });

    it("describes +33612345678 and sends the deprecation headers as initial metadata", async () => {
      const { err, res, headers } = await unary(
        client.lookupPhoneNumber.bind(client),
        { phoneNumber: FR_MOBILE, type: [] },
        auth(customer),
      );
      expect(err).to.equal(null);
      expect(res).to.include({
        phoneNumber: FR_MOBILE,
        countryCode: "FR",
        lineType: "Mobile",
        mcc: "208",
        numberPorted: true,
      });
      expect(res?.carrier).to.be.a("string").and.not.empty;
      expect(res?.callerName).to.equal(undefined);
      expect(headers?.get("deprecation")).to.deep.equal([V1_DEPRECATION]);
      expect(headers?.get("sunset")).to.deep.equal([V1_SUNSET]);
    });

    it("fails +1555 with INVALID_ARGUMENT and the HTTP markers of a 400 invalid_phone_number", async () => {
      const { err } = await unary(
        client.lookupPhoneNumber.bind(client),
        { phoneNumber: "+1555", type: [] },
        auth(customer),
      );
      expect(err?.code).to.equal(status.INVALID_ARGUMENT);
      expect(err?.details).to.include("+1555");
      expect(err?.metadata.get("x-http-status")).to.deep.equal(["400"]);
      const body = JSON.parse(String(err?.metadata.get("x-http-body")[0])) as Record<string, unknown>;
      expect(body).to.deep.equal({
        code: "invalid_phone_number",
        message: err?.details,
        doc_url: `${app.config.DOCS_URL}/errors#invalid_phone_number`,
      });
      expect(err?.metadata.get("deprecation")).to.deep.equal([V1_DEPRECATION]);
    });

    it("maps each V1 refusal to its gRPC status", async () => {
      const suspended = await newCustomer();
      await app.registry.accounts.setStatus(suspended.uuid, "suspended");
      const cases: [Customer, string, status, string][] = [
        [{ uuid: customer.uuid, key: "wrong" }, FR_MOBILE, status.UNAUTHENTICATED, "400"],
        [suspended, FR_MOBILE, status.PERMISSION_DENIED, "400"],
        [frOnly, "+14155552671", status.INVALID_ARGUMENT, "400"],
      ];
      for (const [who, phoneNumber, code, http] of cases) {
        const { err } = await unary(
          client.lookupPhoneNumber.bind(client),
          { phoneNumber, type: [] },
          auth(who),
        );
        expect(err?.code).to.equal(code);
        expect(err?.metadata.get("x-http-status")).to.deep.equal([http]);
      }
    });

    it("returns caller_name over gRPC for a cnam account asking for it", async () => {
      const { res } = await unary(
        client.lookupPhoneNumber.bind(client),
        { phoneNumber: FR_MOBILE, type: ["cnam"] },
        auth(cnamCustomer),
      );
      expect(res?.callerName).to.equal("Jeanne Martin");
    });

    it("is reachable by a generic client that knows the service only through server reflection", async () => {
      const reflection = new GrpcReflection(app.grpcAddress, insecure);
      const services = await reflection.listServices();
      expect(services.sort(), "the served services, not the ones only declared").to.deep.equal([
        "grpc.health.v1.Health",
        "ringfence.delivery.v1.DeliveryReportService",
        "ringfence.delivery.v1.WhatsAppWebhookService",
        "ringfence.lookup.v1.LookupService",
        "ringfence.lookup.v2.LookupService",
        "ringfence.oauth.v1.OAuthService",
        "ringfence.session.v1.PasskeyService",
        "ringfence.session.v1.SessionService",
        "ringfence.stepup.v1.StepUpService",
        "ringfence.verify.v1.VerifyService",
        "ringfence.verify.v2.FraudService",
        "ringfence.verify.v2.VerificationService",
      ]);
      const descriptor = await reflection.getDescriptorBySymbol("ringfence.lookup.v1.LookupService");
      const pkg = descriptor.getPackageObject({ keepCase: true }) as unknown as {
        ringfence: {
          lookup: { v1: { LookupService: new (addr: string, creds: typeof insecure) => GenericClient } };
        };
      };
      const generic = new pkg.ringfence.lookup.v1.LookupService(app.grpcAddress, insecure);
      const res = await new Promise<Record<string, unknown>>((resolve, reject) => {
        generic.LookupPhoneNumber({ phone_number: FR_MOBILE }, auth(customer), (err, r) => {
          if (err) reject(err);
          else resolve(r ?? {});
        });
      });
      generic.close();
      expect(res).to.include({
        phone_number: FR_MOBILE,
        country_code: "FR",
        line_type: "Mobile",
        mcc: "208",
      });
    });
  });
});

interface GenericClient {
  LookupPhoneNumber(
    req: Record<string, unknown>,
    md: ReturnType<typeof metadata>,
    cb: (err: Error | null, res?: Record<string, unknown>) => void,
  ): void;
  close(): void;
}

/** Sends a request as raw bytes, for what fetch will not send (a GET with a body). */
async function rawRequest(baseUrl: string, requestLine: string, body: string): Promise<string> {
  const { connect } = await import("node:net");
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(
        `${requestLine} HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
      );
      socket.write(body, () => undefined);
    });
    let data = "";
    socket.on("data", (d: Buffer) => (data += d.toString()));
    socket.on("close", () => {
      resolve(data);
    });
    socket.on("error", (err) => {
      if (data !== "") resolve(data);
      else reject(err);
    });
  });
}
