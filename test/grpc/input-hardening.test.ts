import { expect } from "chai";
import { makeGenericClientConstructor, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  LookupPhoneNumberRequest,
  LookupPhoneNumberResponse,
  LookupServiceClient,
} from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { signAccessToken } from "../../src/oauth/keys/signing-keys.js";
import { insecure, metadata, startTestApp, type TestApp } from "../support/app.js";
import { rest } from "../support/rest.js";

const FR_MOBILE = "+33612345678";

/** A phone number of `length` characters that is not a valid one: "+3361" then digits. */
const longNumber = (length: number) => `+3361${"2".repeat(length - 5)}`;

interface Answer<T> {
  err: ServiceError | null;
  res: T | undefined;
}

/** One unary call with a deadline, so a stalled channel fails the test instead of hanging it. */
function call<Req, Res>(
  client: {
    makeUnaryRequest: InstanceType<ReturnType<typeof makeGenericClientConstructor>>["makeUnaryRequest"];
  },
  path: string,
  serialize: (r: Req) => Buffer,
  deserialize: (b: Buffer) => Res,
  req: Req,
  md: Metadata = new Metadata(),
): Promise<Answer<Res>> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      serialize,
      deserialize,
      req,
      md,
      { deadline: Date.now() + 15_000 },
      (err: ServiceError | null, res?: Res) => {
        resolve({ err, res: err === null ? res : undefined });
      },
    );
  });
}

const LOOKUP = "/ringfence.lookup.v1.LookupService/LookupPhoneNumber";
const START_OTP_LOGIN = "/ringfence.session.v1.SessionService/StartOtpLogin";

/** A client that sends whatever bytes it is given, as a caller outside our contract could. */
const RawClient = makeGenericClientConstructor({}, "raw");
const passBytes = (b: Buffer) => b;

/** The error body that the x-http-body marker carries, with the marker's raw length. */
function markedBody(err: ServiceError): { raw: string; body: Record<string, unknown> } {
  const raw = err.metadata.get("x-http-body")[0];
  expect(raw, "x-http-body marker").to.be.a("string");
  return { raw: String(raw), body: JSON.parse(String(raw)) as Record<string, unknown> };
}

/** The bytes of a valid lookup request for FR_MOBILE padded with an unknown field to `size` bytes. */
function lookupOfSize(size: number): Buffer {
  const base = LookupPhoneNumberRequest.encode({ phoneNumber: FR_MOBILE, type: [] }).finish();
  // Field 1000 takes a 2-byte tag and, for these sizes, a 2-byte length.
  const padding = new BinaryWriter()
    .tag(1000, WireType.LengthDelimited)
    .bytes(new Uint8Array(size - base.length - 4))
    .finish();
  const bytes = Buffer.concat([base, padding]);
  expect(bytes.length).to.equal(size);
  return bytes;
}

describe("input hardening: bounded errors, undecodable and oversized gRPC messages, strict session tokens", () => {
  let app: TestApp;
  let customer: { uuid: string; key: string };
  let lookup: LookupServiceClient;
  let raw: InstanceType<typeof RawClient>;

  before(async () => {
    app = await startTestApp();
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Test",
      balanceMicros: 10_000_000,
      spendingLimitMicros: 100_000_000,
      features: [],
      regions: [],
    });
    customer = { uuid: account.customerUuid, key: apiKey };
    lookup = new LookupServiceClient(app.grpcAddress, insecure);
    raw = new RawClient(app.grpcAddress, insecure);
  });
  after(async () => {
    lookup.close();
    raw.close();
    await app.stop();
  });

  const auth = () => metadata({ "customer-uuid": customer.uuid, "x-api-key": customer.key });
  const lookupCall = (phoneNumber: string) =>
    call(
      lookup,
      LOOKUP,
      (r: LookupPhoneNumberRequest) => Buffer.from(LookupPhoneNumberRequest.encode(r).finish()),
      (b) => LookupPhoneNumberResponse.decode(b),
      { phoneNumber, type: [] },
      auth(),
    );

  describe("over gRPC", () => {
    it("refuses a 150 KB phone_number with RESOURCE_EXHAUSTED (over MAX_BODY_BYTES), and the channel still answers", async () => {
      const { err } = await lookupCall(longNumber(150_000));
      expect(err?.code).to.equal(status.RESOURCE_EXHAUSTED);
      expect(err?.details.length).to.be.below(300);

      const { err: after, res } = await lookupCall(FR_MOBILE);
      expect(after).to.equal(null);
      expect(res?.phoneNumber).to.equal(FR_MOBILE);
    });

    it("answers a 60 KB phone_number with INVALID_ARGUMENT, a short message and a small x-http-body, and the channel still answers", async () => {
      const { err } = await lookupCall(longNumber(60_000));
      expect(err?.code).to.equal(status.INVALID_ARGUMENT);
      if (err === null) return;
      expect(err.details.length).to.be.below(300);
      expect(err.details).to.match(/^"\+33612222/);
      expect(err.details).to.include("is not a valid E.164 phone number");
      expect(err.metadata.get("x-http-status")).to.deep.equal(["400"]);
      const marker = markedBody(err);
      expect(marker.raw.length).to.be.below(1024);
      expect(marker.body).to.include({ code: "invalid_phone_number", message: err.details });

      const { err: after, res } = await lookupCall(FR_MOBILE);
      expect(after).to.equal(null);
      expect(res?.phoneNumber).to.equal(FR_MOBILE);
    });

    it("answers bytes that are not a lookup request with INVALID_ARGUMENT and the V1 bad_request body", async () => {
      // Field 1 claims 5 bytes of string and carries 1.
      const { err } = await call(raw, LOOKUP, passBytes, passBytes, Buffer.from([0x0a, 0x05, 0x2b]), auth());
      expect(err?.code).to.equal(status.INVALID_ARGUMENT);
      if (err === null) return;
      expect(err.details).to.match(/^the request is not a valid protobuf message/);
      expect(err.metadata.get("x-http-status")).to.deep.equal(["400"]);
      expect(markedBody(err).body).to.deep.equal({
        code: "bad_request",
        message: err.details,
        doc_url: `${app.config.DOCS_URL}/errors#bad_request`,
      });
    });

    it("answers bytes that are not a session request (an unknown wire type) with INVALID_ARGUMENT and the session bad_request body", async () => {
      const { err } = await call(
        raw,
        START_OTP_LOGIN,
        passBytes,
        passBytes,
        // Field 1 with wire type 7, which does not exist.
        Buffer.from([0x0f]),
      );
      expect(err?.code).to.equal(status.INVALID_ARGUMENT);
      if (err === null) return;
      expect(err.metadata.get("x-http-status")).to.deep.equal(["400"]);
      expect(markedBody(err).body).to.deep.equal({ code: "bad_request", message: err.details });
      expect(err.details).to.match(/^the request is not a valid protobuf message/);
    });
  });

  describe("over REST", () => {
    it("answers a 10 KB phone_number in POST /v1/authentication with invalid_phone_number and a short message", async () => {
      const res = await rest(app.baseUrl).post(
        "/v1/authentication",
        { customer_uuid: customer.uuid, phone_number: longNumber(10_000) },
        { "x-api-key": customer.key },
      );
      expect(res.status).to.equal(400);
      expect(res.text.length).to.be.below(600);
      const body = res.body as { code: string; message: string };
      expect(body.code).to.equal("invalid_phone_number");
      expect(body.message).to.match(/^"\+33612222.*" is not a valid E\.164 phone number$/);
      expect(body.message.length).to.be.below(300);
    });

    it("answers a 10 KB phone_number in the lookup path with invalid_phone_number and a short message", async () => {
      const res = await rest(app.baseUrl).get(`/v1/lookup/${encodeURIComponent(longNumber(10_000))}`, {
        "customer-uuid": customer.uuid,
        "x-api-key": customer.key,
      });
      expect(res.status).to.equal(400);
      const body = res.body as { code: string; message: string };
      expect(body.code).to.equal("invalid_phone_number");
      expect(body.message).to.match(/^"\+33612222/);
      expect(body.message.length).to.be.below(300);
    });

    it("answers a path of 10 KB that matches no route with a short message", async () => {
      const res = await rest(app.baseUrl).get(`/v1/${"x".repeat(10_000)}`);
      expect(res.status).to.equal(400);
      const body = res.body as { message: string };
      expect(body.message).to.match(/^no such path: \/v1\/xxx/);
      expect(body.message.length).to.be.below(300);
    });
  });

  describe("with MAX_BODY_BYTES=1024", () => {
    let small: TestApp;
    let client: InstanceType<typeof RawClient>;
    let smallAuth: Metadata;
    before(async () => {
      small = await startTestApp({ MAX_BODY_BYTES: "1024" });
      const { account, apiKey } = await small.registry.accounts.create({
        name: "Small",
        balanceMicros: 0,
        spendingLimitMicros: 0,
        features: [],
        regions: [],
      });
      smallAuth = metadata({ "customer-uuid": account.customerUuid, "x-api-key": apiKey });
      client = new RawClient(small.grpcAddress, insecure);
    });
    after(async () => {
      client.close();
      await small.stop();
    });

    it("serves a gRPC message of exactly 1024 bytes", async () => {
      const { err, res } = await call(
        client,
        LOOKUP,
        passBytes,
        (b) => LookupPhoneNumberResponse.decode(b),
        lookupOfSize(1024),
        smallAuth,
      );
      expect(err).to.equal(null);
      expect(res?.phoneNumber).to.equal(FR_MOBILE);
    });

    it("refuses a gRPC message of 1025 bytes with RESOURCE_EXHAUSTED", async () => {
      const { err } = await call(client, LOOKUP, passBytes, passBytes, lookupOfSize(1025), smallAuth);
      expect(err?.code).to.equal(status.RESOURCE_EXHAUSTED);
    });
  });

  describe("session tokens on GET /v1/session/me", () => {
    let appId: string;
    let otherAppId: string;
    let userId: string;
    let sessionId: string;

    before(async () => {
      ({
        app: { appId },
      } = await app.registry.apps.create("Shop"));
      ({
        app: { appId: otherAppId },
      } = await app.registry.apps.create("Other"));
      const user = await app.registry.users.create(appId, [
        { type: "email_address", value: "claims@example.com" },
      ]);
      if (user === undefined) throw new Error("user not created");
      userId = user.userId;
      ({ sessionId } = await app.registry.sessions.open(userId, appId, "jti-claims", { amr: ["otp"] }));
    });

    /** A token signed with the service's real signing key: the claims issueSessionToken sets, changed. */
    async function token(change: Record<string, unknown>, typ = "session+jwt"): Promise<string> {
      const iat = Math.floor(Date.now() / 1000);
      const claims: Record<string, unknown> = {
        iss: app.config.ISSUER_URL,
        sub: userId,
        aud: appId,
        app_id: appId,
        session_id: sessionId,
        scope: "",
        iat,
        exp: iat + 600,
        jti: "jti-claims",
        amr: ["otp"],
        auth_time: iat,
        ...change,
      };
      // JSON drops undefined claims, which is how a test leaves one out.
      return signAccessToken(app.registry.signingKeys, claims as { iat: number; exp: number }, { typ });
    }

    async function me(bearer: string) {
      const res = await rest(app.baseUrl).call("GET", "/v1/session/me", { bearer });
      return { status: res.status, challenge: res.headers.get("www-authenticate"), body: res.body };
    }

    it("serves a token with exp, iat and aud equal to its app_id", async () => {
      const answer = await me(await token({}));
      expect(answer.status).to.equal(200);
      expect(answer.body).to.include({ user_id: userId });
    });

    const refused: [string, () => Record<string, unknown>, string?][] = [
      ["without exp", () => ({ exp: undefined })],
      ["without iat", () => ({ iat: undefined })],
      ["without aud", () => ({ aud: undefined })],
      ["with another app's aud", () => ({ aud: otherAppId })],
      ["with aud as a list holding its app_id", () => ({ aud: [appId] })],
      ["with a server token's client_id", () => ({ client_id: "rfc_someclient" })],
      ["with a server token's typ at+jwt", () => ({}), "at+jwt"],
    ];
    for (const [name, change, typ] of refused) {
      it(`refuses a token ${name} with 401 invalid_token`, async () => {
        const answer = await me(await token(change(), typ));
        expect(answer.status).to.equal(401);
        expect(answer.body.code).to.equal("invalid_token");
        expect(answer.body.message).to.be.a("string").and.not.empty;
        expect(answer.challenge).to.match(/^Bearer realm="ringfence", error="invalid_token"$/);
      });
    }
  });
});
