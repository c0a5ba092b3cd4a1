import { expect } from "chai";
import { DeliveryError } from "../src/messaging/provider.js";
import { status } from "@grpc/grpc-js";
import {
  ERRORS,
  isRedisUnavailable,
  MAX_MESSAGE_CHARS,
  MAX_QUOTED_CHARS,
  OAUTH_ERROR_CODES,
  quote,
  RingfenceError,
  toWire,
  V1_ERROR_CODES,
  V1_OTHER_CODES,
} from "../src/errors.js";
import { CODES_ANSWERED_400 } from "./support/ding-contract.js";

const DOCS = "https://docs.example";

describe("error mapping", () => {
  it("answers 400 for exactly the original SDKs' error codes but internal_server_error (decisions section 4)", () => {
    expect([...V1_ERROR_CODES].sort()).to.deep.equal([...CODES_ANSWERED_400].sort());
    expect([...V1_OTHER_CODES].sort()).to.deep.equal([
      "gone",
      "internal_server_error",
      "spending_limit_exceeded",
    ]);
  });

  const decided: [string, number, status][] = [
    ["account_invalid", 400, status.UNAUTHENTICATED],
    ["invalid_phone_number", 400, status.INVALID_ARGUMENT],
    ["unsupported_region", 400, status.INVALID_ARGUMENT],
    ["negative_balance", 400, status.FAILED_PRECONDITION],
    ["suspended_account", 400, status.PERMISSION_DENIED],
    ["bad_request", 400, status.INVALID_ARGUMENT],
    ["invalid_auth_uuid", 400, status.INVALID_ARGUMENT],
    ["no_associated_auth_found", 400, status.NOT_FOUND],
    ["invalid_template_id", 400, status.INVALID_ARGUMENT],
    ["invalid_sender_id", 400, status.INVALID_ARGUMENT],
    ["unauthorized_sender_id", 400, status.PERMISSION_DENIED],
    ["invalid_app_realm", 400, status.INVALID_ARGUMENT],
    ["app_realm_require_device_type", 400, status.INVALID_ARGUMENT],
    ["unsupported_app_realm_device_type", 400, status.INVALID_ARGUMENT],
    ["invalid_device_id", 400, status.INVALID_ARGUMENT],
    ["invalid_device_model", 400, status.INVALID_ARGUMENT],
    ["invalid_os_version", 400, status.INVALID_ARGUMENT],
    ["invalid_app_version", 400, status.INVALID_ARGUMENT],
    ["invalid_feedback_status", 400, status.INVALID_ARGUMENT],
    ["duplicated_feedback_status", 400, status.ALREADY_EXISTS],
    ["blocked_number", 400, status.PERMISSION_DENIED],
    ["invalid_line", 400, status.INVALID_ARGUMENT],
    ["spending_limit_exceeded", 402, status.FAILED_PRECONDITION],
    ["gone", 410, status.UNIMPLEMENTED],
    ["internal_server_error", 500, status.INTERNAL],
  ];
  for (const [code, http, grpc] of decided) {
    it(`maps ${code} to HTTP ${http}, gRPC ${status[grpc]} and the V1 body`, () => {
      expect(ERRORS).to.have.property(code);
      const wire = toWire(new RingfenceError(code as keyof typeof ERRORS, "why"), "v1", DOCS);
      expect(wire).to.deep.include({ httpStatus: http, grpcStatus: grpc, message: "why" });
      expect(wire.body).to.deep.equal({ code, message: "why", doc_url: `${DOCS}/errors#${code}` });
    });
  }

  it("names every V1 code in the table above", () => {
    expect(decided.map(([code]) => code).sort()).to.deep.equal([...V1_ERROR_CODES, ...V1_OTHER_CODES].sort());
  });

  const shared: [string, number][] = [
    ["not_found", 400],
    ["method_not_allowed", 400],
    ["payload_too_large", 400],
    ["unsupported_media_type", 400],
    ["too_many_attempts", 400],
    ["unavailable", 503],
  ];
  for (const [code, http] of shared) {
    it(`answers the shared ${code} in V1's closed list of codes, with HTTP ${http}`, () => {
      const wire = toWire(new RingfenceError(code as keyof typeof ERRORS, "why"), "v1", DOCS);
      const v1 = http === 503 ? "internal_server_error" : "bad_request";
      expect([wire.httpStatus, wire.body.code]).to.deep.equal([http, v1]);
      // The gRPC status keeps the meaning.
      expect(wire.grpcStatus).to.equal(ERRORS[code as keyof typeof ERRORS].grpc);
    });
  }

  it("answers an unexpected failure with a 500 that reveals nothing of it", () => {
    const wire = toWire(new Error("secret detail at /srv/x.ts"), "v1", DOCS);
    expect(wire.httpStatus).to.equal(500);
    expect(JSON.stringify(wire.body)).not.to.include("secret");
  });

  it("answers Redis being out of reach with 503, Retry-After and the V1 internal_server_error code", () => {
    const wire = toWire(new Error("connect ECONNREFUSED 127.0.0.1:6379"), "v1", DOCS);
    expect(wire).to.deep.include({ httpStatus: 503, grpcStatus: status.UNAVAILABLE });
    expect(wire.headers).to.have.property("retry-after");
    expect(wire.body).to.include({ code: "internal_server_error" });
  });

  const named = (name: string, message: string) => Object.assign(new Error(message), { name });
  const outages: [string, Error][] = [
    ["a hung server", new Error("Command timed out")],
    [
      "retries used up",
      named("MaxRetriesPerRequestError", "Reached the max retries per request limit (which is 2)."),
    ],
    ["a closed connection", new Error("Connection is closed.")],
    ["an unwritable stream", new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    ["a reset", Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" })],
    ["a broken pipe", new Error("write EPIPE")],
    ["a connect timeout", new Error("connect ETIMEDOUT")],
    ["a loading server", new Error("LOADING Redis is loading the dataset in memory")],
    ["a cluster down", new Error("CLUSTERDOWN The cluster is down")],
    ["a slot migrating", new Error("TRYAGAIN Multiple keys request during rehashing of slot")],
    [
      "a master down",
      new Error("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
    ],
    ["no cluster node", named("ClusterAllFailedError", "Failed to refresh slots cache.")],
    ["an outage as the cause", new Error("sweep failed", { cause: new Error("Command timed out") })],
  ];
  for (const [what, err] of outages) {
    it(`answers ${what} with unavailable in every dialect: 503, Retry-After, gRPC UNAVAILABLE`, () => {
      const bodies = {
        v1: "internal_server_error",
        session: "unavailable",
        oauth: "temporarily_unavailable",
      };
      for (const [dialect, code] of Object.entries(bodies) as ["v1" | "session" | "oauth", string][]) {
        const wire = toWire(err, dialect, DOCS);
        expect(wire, dialect).to.deep.include({ httpStatus: 503, grpcStatus: status.UNAVAILABLE });
        expect(wire.headers["retry-after"], dialect).to.match(/^\d+$/);
        expect(dialect === "oauth" ? wire.body.error : wire.body.code, dialect).to.equal(code);
      }
    });
  }

  it("does not take an unreachable message provider for a Redis outage", () => {
    const provider = new DeliveryError("HTTP SMS provider unreachable: ECONNREFUSED");
    expect(isRedisUnavailable(provider)).to.equal(false);
    expect(toWire(provider, "session", DOCS)).to.deep.include({ httpStatus: 500 });
  });

  const oauthDecided: [string, number][] = [
    ["invalid_request", 400],
    ["invalid_client", 401],
    ["invalid_grant", 400],
    ["unauthorized_client", 400],
    ["unsupported_grant_type", 400],
    ["invalid_scope", 400],
    // RFC 9449 section 5.
    ["invalid_dpop_proof", 400],
  ];
  it("knows every RFC 6749 token error code, and RFC 9449's", () => {
    expect([...OAUTH_ERROR_CODES].sort()).to.deep.equal(oauthDecided.map(([c]) => c).sort());
  });
  for (const [code, http] of oauthDecided) {
    it(`answers ${code} at the token endpoint with HTTP ${http} and {error, error_description}`, () => {
      const wire = toWire(new RingfenceError(code as keyof typeof ERRORS, "why"), "oauth", DOCS);
      expect(wire.httpStatus).to.equal(http);
      expect(wire.body).to.deep.equal({ error: code, error_description: "why" });
    });
  }

  it("turns other failures at the token endpoint into RFC 6749 codes", () => {
    expect(toWire(new RingfenceError("bad_request", "x"), "oauth", DOCS).body).to.include({
      error: "invalid_request",
    });
    expect(toWire(new Error("boom"), "oauth", DOCS).body).to.include({ error: "server_error" });
    expect(toWire(new Error("connect ECONNREFUSED"), "oauth", DOCS).body).to.include({
      error: "temporarily_unavailable",
    });
  });

  it("uses {code, message} and its details for the session family", () => {
    const wire = toWire(new RingfenceError("bad_request", "no", {}, { field: "x" }), "session", DOCS);
    expect(wire.body).to.deep.equal({ code: "bad_request", message: "no", field: "x" });
  });

  it("quotes a short input whole, and only the first characters of a long one", () => {
    expect(quote("+1555")).to.equal('"+1555"');
    expect(quote('a"b\n')).to.equal('"a\\"b\\n"');
    const long = quote("9".repeat(100_000));
    expect(JSON.parse(long)).to.equal(`${"9".repeat(MAX_QUOTED_CHARS - 1)}\u2026`);
  });

  it("never cuts a quoted input inside a surrogate pair", () => {
    const cut = JSON.parse(quote(`${"a".repeat(MAX_QUOTED_CHARS - 2)}\u{1F600}tail`)) as string;
    expect(cut).to.equal(`${"a".repeat(MAX_QUOTED_CHARS - 2)}\u2026`);
  });

  for (const dialect of ["v1", "session", "oauth"] as const) {
    it(`cuts a long message to ${MAX_MESSAGE_CHARS} characters in the ${dialect} body and the gRPC message`, () => {
      const huge = `start ${"x".repeat(200_000)}`;
      const wire = toWire(new RingfenceError("bad_request", huge, {}, { field: huge }), dialect, DOCS);
      expect(wire.message).to.have.length(MAX_MESSAGE_CHARS);
      expect(wire.message.startsWith("start xxx")).to.equal(true);
      expect(JSON.stringify(wire.body).length).to.be.below(3 * MAX_MESSAGE_CHARS);
    });
  }
});
