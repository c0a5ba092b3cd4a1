import { expect } from "chai";
import { RingfenceError, toWire } from "../../src/errors.js";
import type {
  AllowedScope,
  CreateStepUpConfigRequest,
  DirectDecision,
} from "../../src/gen/ringfence/stepup/v1/stepup_service.js";
import {
  StoredStepUpConfig,
  toResponse,
  validateStepUpConfig,
  type StepUpConfig,
} from "../../src/stepup/config.js";

const APP_SCOPES = ["svc:pwd:write", "svc:billing:write"];

function direct(overrides: Partial<DirectDecision> = {}): DirectDecision {
  return {
    identifierTypes: ["email_address"],
    status: "review",
    grantedFor: 300,
    grantMode: "single-use",
    steps: [{ order: 1, key: "verify_email", expirationDuration: 300 }],
    ...overrides,
  };
}

function directEntry(scope: string, d: DirectDecision): AllowedScope {
  return { scope, mode: "direct", direct: d, delegated: undefined };
}

function delegatedEntry(scope: string, url = "https://app.example/stepup-hook"): AllowedScope {
  return { scope, mode: "delegated", direct: undefined, delegated: { url } };
}

/** The specification's direct-only configuration: one entry per challenge kind. */
function specConfig(): CreateStepUpConfigRequest {
  return {
    appId: "app_0123456789abcdef",
    jwksUrl: "",
    stepKeys: [],
    allowedScopes: [
      directEntry("svc:pwd:write", direct()),
      directEntry(
        "svc:pwd:write",
        direct({
          identifierTypes: ["phone_number"],
          steps: [{ order: 1, key: "verify_sms", expirationDuration: 300 }],
        }),
      ),
    ],
  };
}

/** The spec's configuration with one direct decision of its first entry changed. */
function withFirst(overrides: Partial<DirectDecision>): CreateStepUpConfigRequest {
  const req = specConfig();
  req.allowedScopes[0] = directEntry("svc:pwd:write", direct(overrides));
  return req;
}

function rejected(req: CreateStepUpConfigRequest, appScopes: readonly string[] = APP_SCOPES): RingfenceError {
  try {
    validateStepUpConfig(req, appScopes);
  } catch (err) {
    expect(err).to.be.instanceOf(RingfenceError);
    const e = err as RingfenceError;
    expect(e.code).to.equal("invalid_stepup_config");
    return e;
  }
  expect.fail("the configuration was accepted");
}

function expectField(req: CreateStepUpConfigRequest, field: string): void {
  const err = rejected(req);
  expect(err.details).to.deep.equal({ field });
  expect(err.message).to.match(new RegExp(`^${field.replace(/[[\].]/g, "\\$&")} `));
}

describe("step-up configuration", () => {
  describe("accepted", () => {
    it("the specification's two-entry direct configuration, with jwks_url empty", () => {
      const config = validateStepUpConfig(specConfig(), APP_SCOPES);
      expect(config).to.deep.equal({
        jwksUrl: "",
        stepKeys: [],
        entries: [
          {
            scope: "svc:pwd:write",
            mode: "direct",
            identifierTypes: ["email_address"],
            status: "review",
            grantedFor: 300,
            grantMode: "single-use",
            steps: [{ order: 1, key: "verify_email", expirationDuration: 300 }],
          },
          {
            scope: "svc:pwd:write",
            mode: "direct",
            identifierTypes: ["phone_number"],
            status: "review",
            grantedFor: 300,
            grantMode: "single-use",
            steps: [{ order: 1, key: "verify_sms", expirationDuration: 300 }],
          },
        ],
      } satisfies StepUpConfig);
    });

    it("is echoed back by toResponse in the shape it was sent", () => {
      const req = specConfig();
      expect(toResponse(req.appId, validateStepUpConfig(req, APP_SCOPES))).to.deep.equal(req);
    });

    it("a delegated fallback with a jwks_url, and step_keys kept as given", () => {
      const req = specConfig();
      req.jwksUrl = "https://app.example/.well-known/jwks.json";
      req.stepKeys = [{ key: "verify_email", note: "kept" }];
      req.allowedScopes.push(delegatedEntry("svc:pwd:write"));
      const config = validateStepUpConfig(req, APP_SCOPES);
      expect(config.entries[2]).to.deep.equal({
        scope: "svc:pwd:write",
        mode: "delegated",
        url: "https://app.example/stepup-hook",
      });
      expect(config.stepKeys).to.deep.equal([{ key: "verify_email", note: "kept" }]);
      expect(toResponse(req.appId, config)).to.deep.equal(req);
    });

    it("the bounds themselves: granted_for 0 and 86400, expiration_duration 30 and 3600", () => {
      for (const grantedFor of [0, 86_400]) {
        expect(() => validateStepUpConfig(withFirst({ grantedFor }), APP_SCOPES)).not.to.throw();
      }
      for (const expirationDuration of [30, 3_600]) {
        const steps = [{ order: 1, key: "verify_email", expirationDuration }];
        expect(() => validateStepUpConfig(withFirst({ steps }), APP_SCOPES)).not.to.throw();
      }
    });

    it("continue and block without steps, grant_mode session, a custom step key", () => {
      const req = specConfig();
      req.allowedScopes = [
        directEntry("svc:pwd:write", direct({ status: "continue", steps: [], grantMode: "session" })),
        directEntry("svc:billing:write", direct({ status: "block", steps: [], grantedFor: 0 })),
        directEntry(
          "svc:billing:write",
          direct({
            identifierTypes: ["phone_number"],
            steps: [{ order: 1, key: "verify_document", expirationDuration: 600 }],
          }),
        ),
      ];
      expect(() => validateStepUpConfig(req, APP_SCOPES)).not.to.throw();
    });

    it("steps given out of order are stored in order", () => {
      const req = withFirst({
        identifierTypes: ["email_address", "phone_number"],
        steps: [
          { order: 2, key: "verify_sms", expirationDuration: 120 },
          { order: 1, key: "verify_email", expirationDuration: 300 },
        ],
      });
      req.allowedScopes.pop();
      const entry = validateStepUpConfig(req, APP_SCOPES).entries[0];
      expect(entry?.mode === "direct" && entry.steps).to.deep.equal([
        { order: 1, key: "verify_email", expirationDuration: 300 },
        { order: 2, key: "verify_sms", expirationDuration: 120 },
      ]);
    });

    it("round-trips through its stored JSON form", () => {
      const req = { ...specConfig(), jwksUrl: "https://app.example/jwks.json" };
      req.allowedScopes.push(delegatedEntry("svc:pwd:write"));
      const config = validateStepUpConfig(req, APP_SCOPES);
      expect(StoredStepUpConfig.parse(JSON.parse(JSON.stringify(config)))).to.deep.equal(config);
      expect(() => StoredStepUpConfig.parse({ ...config, entries: [{ mode: "other" }] })).to.throw();
    });

    it("the same identifier type under two different scopes", () => {
      const req = specConfig();
      req.allowedScopes.push(directEntry("svc:billing:write", direct()));
      expect(() => validateStepUpConfig(req, APP_SCOPES)).not.to.throw();
    });
  });

  describe("refused with 400 invalid_stepup_config naming the field", () => {
    it("answers the session error body {code, message, field} with HTTP 400", () => {
      const err = rejected({ ...specConfig(), allowedScopes: [] });
      const wire = toWire(err, "session", "https://docs.example");
      expect(wire.httpStatus).to.equal(400);
      expect(wire.body).to.deep.equal({
        code: "invalid_stepup_config",
        message: "allowed_scopes must not be empty",
        field: "allowed_scopes",
      });
    });

    it("allowed_scopes empty", () => {
      expectField({ ...specConfig(), allowedScopes: [] }, "allowed_scopes");
    });

    it("allowed_scopes with more than 50 entries", () => {
      const many = Array.from({ length: 51 }, () => directEntry("svc:pwd:write", direct()));
      expectField({ ...specConfig(), allowedScopes: many }, "allowed_scopes");
    });

    it("a scope that is not a well-formed scope token", () => {
      const req = specConfig();
      const second = req.allowedScopes[1]!;
      for (const scope of ["svc pwd", "", 'svc:"pwd"', "x".repeat(129)]) {
        req.allowedScopes[1] = { ...second, scope };
        // Registered or not, a malformed scope is refused for its form.
        expect(rejected(req, [...APP_SCOPES, scope]).details).to.deep.equal({
          field: "allowed_scopes[1].scope",
        });
      }
    });

    it("a scope not registered for the app", () => {
      const req = specConfig();
      req.allowedScopes[1] = { ...req.allowedScopes[1]!, scope: "svc:admin" };
      expectField(req, "allowed_scopes[1].scope");
    });

    it("a mode other than direct or delegated", () => {
      const req = specConfig();
      req.allowedScopes[1] = { ...req.allowedScopes[1]!, mode: "inline" };
      expectField(req, "allowed_scopes[1].mode");
    });

    it("a direct entry without its direct object", () => {
      const req = specConfig();
      req.allowedScopes[0] = { ...req.allowedScopes[0]!, direct: undefined };
      expectField(req, "allowed_scopes[0].direct");
    });

    it("a direct entry that also carries a delegated object", () => {
      const req = specConfig();
      req.allowedScopes[0] = { ...req.allowedScopes[0]!, delegated: { url: "https://app.example/hook" } };
      expectField(req, "allowed_scopes[0].delegated");
    });

    it("a delegated entry without its delegated object", () => {
      const req = { ...specConfig(), jwksUrl: "https://app.example/jwks.json" };
      req.allowedScopes.push({ ...delegatedEntry("svc:pwd:write"), delegated: undefined });
      expectField(req, "allowed_scopes[2].delegated");
    });

    it("a delegated entry that also carries a direct object", () => {
      const req = { ...specConfig(), jwksUrl: "https://app.example/jwks.json" };
      req.allowedScopes.push({ ...delegatedEntry("svc:pwd:write"), direct: direct() });
      expectField(req, "allowed_scopes[2].direct");
    });

    it("identifier_types empty", () => {
      expectField(withFirst({ identifierTypes: [] }), "allowed_scopes[0].direct.identifier_types");
    });

    it("identifier_types with a value other than email_address or phone_number", () => {
      expectField(
        withFirst({ identifierTypes: ["email_address", "username"] }),
        "allowed_scopes[0].direct.identifier_types[1]",
      );
    });

    it("identifier_types with a value twice", () => {
      expectField(
        withFirst({ identifierTypes: ["email_address", "email_address"] }),
        "allowed_scopes[0].direct.identifier_types[1]",
      );
    });

    it("a (scope, identifier_type) pair on two direct entries", () => {
      const req = specConfig();
      req.allowedScopes.push(
        directEntry(
          "svc:pwd:write",
          direct({
            identifierTypes: ["phone_number", "email_address"],
            steps: [{ order: 1, key: "verify_sms", expirationDuration: 300 }],
          }),
        ),
      );
      // phone_number at [0] is the first repeat (entry 1 has it).
      expectField(req, "allowed_scopes[2].direct.identifier_types[0]");
    });

    it("two delegated entries for one scope", () => {
      const req = { ...specConfig(), jwksUrl: "https://app.example/jwks.json" };
      req.allowedScopes.push(delegatedEntry("svc:pwd:write"), delegatedEntry("svc:billing:write"));
      expect(() => validateStepUpConfig(req, APP_SCOPES)).not.to.throw();
      req.allowedScopes.push(delegatedEntry("svc:pwd:write", "https://other.example/hook"));
      expectField(req, "allowed_scopes[4].scope");
    });

    it("jwks_url empty while an entry is delegated", () => {
      const req = specConfig();
      req.allowedScopes.push(delegatedEntry("svc:pwd:write"));
      expectField(req, "jwks_url");
    });

    it("jwks_url that is not an http(s) URL, even when every entry is direct", () => {
      for (const jwksUrl of ["not a url", "ftp://app.example/jwks.json", "file:///etc/passwd", "https://"]) {
        expectField({ ...specConfig(), jwksUrl }, "jwks_url");
      }
    });

    it("granted_for below 0, above 86400 or not an integer", () => {
      for (const grantedFor of [-1, 86_401, 1.5]) {
        expectField(withFirst({ grantedFor }), "allowed_scopes[0].direct.granted_for");
      }
    });

    it("a status other than continue, review or block", () => {
      expectField(withFirst({ status: "allow" }), "allowed_scopes[0].direct.status");
    });

    it("a review without steps", () => {
      expectField(withFirst({ status: "review", steps: [] }), "allowed_scopes[0].direct.steps");
    });

    it("a continue or block with steps", () => {
      for (const status of ["continue", "block"]) {
        expectField(withFirst({ status }), "allowed_scopes[0].direct.steps");
      }
    });

    it("more than 10 steps", () => {
      const steps = Array.from({ length: 11 }, (_, i) => ({
        order: i + 1,
        key: "verify_email",
        expirationDuration: 300,
      }));
      expectField(withFirst({ steps }), "allowed_scopes[0].direct.steps");
    });

    it("step orders with a gap", () => {
      const steps = [
        { order: 1, key: "verify_email", expirationDuration: 300 },
        { order: 3, key: "verify_email", expirationDuration: 300 },
      ];
      expectField(withFirst({ steps }), "allowed_scopes[0].direct.steps[1].order");
    });

    it("step orders repeated", () => {
      const steps = [
        { order: 1, key: "verify_email", expirationDuration: 300 },
        { order: 1, key: "verify_email", expirationDuration: 300 },
      ];
      expectField(withFirst({ steps }), "allowed_scopes[0].direct.steps[1].order");
    });

    it("a step order that does not start at 1", () => {
      const steps = [{ order: 0, key: "verify_email", expirationDuration: 300 }];
      expectField(withFirst({ steps }), "allowed_scopes[0].direct.steps[0].order");
    });

    it("a step key that is neither built in nor a well-formed custom key", () => {
      for (const key of ["Verify-Email", "", "9steps", "x".repeat(65)]) {
        const steps = [{ order: 1, key, expirationDuration: 300 }];
        expectField(withFirst({ steps }), "allowed_scopes[0].direct.steps[0].key");
      }
    });

    it("expiration_duration below 30 s or above 3600 s", () => {
      for (const expirationDuration of [29, 3_601, 0]) {
        const steps = [{ order: 1, key: "verify_email", expirationDuration }];
        expectField(withFirst({ steps }), "allowed_scopes[0].direct.steps[0].expiration_duration");
      }
    });

    it("a verify_email step on an entry without email_address", () => {
      expectField(withFirst({ identifierTypes: ["phone_number"] }), "allowed_scopes[0].direct.steps[0].key");
    });

    it("a verify_sms step on an entry without phone_number", () => {
      const req = specConfig();
      req.allowedScopes[1] = directEntry(
        "svc:billing:write",
        direct({
          identifierTypes: ["email_address"],
          steps: [{ order: 1, key: "verify_sms", expirationDuration: 300 }],
        }),
      );
      expectField(req, "allowed_scopes[1].direct.steps[0].key");
    });

    it("a grant_mode other than single-use or session", () => {
      expectField(withFirst({ grantMode: "forever" }), "allowed_scopes[0].direct.grant_mode");
    });

    it("a delegated url that is not an http(s) URL", () => {
      const req = { ...specConfig(), jwksUrl: "https://app.example/jwks.json" };
      req.allowedScopes.push(delegatedEntry("svc:pwd:write", "javascript:alert(1)"));
      expectField(req, "allowed_scopes[2].delegated.url");
    });

    it("a step_keys element that is not an object", () => {
      const req = specConfig();
      req.stepKeys = [{ ok: true }, [1, 2]];
      expectField(req, "step_keys[1]");
    });
  });
});
