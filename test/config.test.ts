import { expect } from "chai";
import { ConfigError, loadConfig } from "../src/config.js";

describe("configuration", () => {
  it("has the decided defaults", () => {
    const c = loadConfig({});
    expect(c).to.include({
      GRPC_PORT: 50051,
      HTTP_PORT: 8080,
      HOST: "127.0.0.1",
      REDIS_URL: "redis://127.0.0.1:6379",
      ISSUER_URL: "http://127.0.0.1:8080",
      V1_AFTER_SUNSET: "serve",
    });
    expect(c.REDIS_CLUSTER_NODES).to.equal(undefined);
    expect(c).to.include({
      SMS_PROVIDER: "log",
      SMS_FROM: "Ringfence",
      OTP_LENGTH: 6,
      OTP_TTL_SECONDS: 600,
      OTP_MAX_CHECKS: 5,
      OTP_MAX_RETRIES: 3,
      OTP_RETRY_INTERVAL_SECONDS: 30,
      SMS_HOLD_MARGIN_MS: 30_000,
      SMS_HOLD_RECOVERY_INTERVAL_MS: 30_000,
    });
    expect(c.RATE_LIMIT_NUMBER).to.deep.equal({ limit: 5, windowSeconds: 600 });
    // The fraud engine's second pass (decisions 9.4).
    expect(c).to.include({
      FRAUD_NEW_DESTINATION_BUDGET: 30,
      FRAUD_RETURNING_DAYS: 90,
      FRAUD_SOURCE_SENDS: 20,
      FRAUD_SOURCE_COUNTRIES: 3,
      FRAUD_SOURCE_SHARE: 0.8,
      FRAUD_COUNTRY_SPREAD: 3,
    });
    expect(c.APP_SMS_DAILY_LIMIT).to.deep.equal({ limit: 10_000, windowSeconds: 86_400 });
    expect(c.SPAM_LINE_TYPES).to.deep.equal(["PremiumRate", "SharedCost"]);
    expect(c.devDefaults).to.deep.equal(["SECRETS_KEY", "SMS_PROVIDER", "EMAIL_PROVIDER"]);
  });

  it("bounds the gateway's header and request timeouts, the header one within the request one", () => {
    expect(loadConfig({})).to.include({ HTTP_HEADERS_TIMEOUT_MS: 10_000, HTTP_REQUEST_TIMEOUT_MS: 30_000 });
    expect(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: "20000", HTTP_REQUEST_TIMEOUT_MS: "15000" }))
      .to.throw(ConfigError)
      .with.property("message")
      .that.equals("invalid HTTP_HEADERS_TIMEOUT_MS: may not exceed HTTP_REQUEST_TIMEOUT_MS (15000)");
  });

  it("reads REDIS_CLUSTER_NODES as a comma list", () => {
    const c = loadConfig({ REDIS_CLUSTER_NODES: "10.0.0.1:7000, 10.0.0.2:7001" });
    expect(c.REDIS_CLUSTER_NODES).to.deep.equal(["10.0.0.1:7000", "10.0.0.2:7001"]);
  });

  const bad: [string, string][] = [
    ["GRPC_PORT", "http"],
    ["HTTP_PORT", "70000"],
    ["REDIS_URL", "localhost:6379"],
    ["REDIS_CLUSTER_NODES", "a,b"],
    ["ISSUER_URL", "ftp://x"],
    ["SECRETS_KEY", "c2hvcnQ="],
    ["V1_AFTER_SUNSET", "never"],
    ["NODE_ENV", "staging"],
    ["SMS_PROVIDER", "carrier-pigeon"],
    ["SMPP_URL", "http://x"],
    ["SMS_PRICES", "FR=0.07"],
    ["SMS_HOLD_MARGIN_MS", "10"],
    ["SMS_HOLD_RECOVERY_INTERVAL_MS", "soon"],
    ["OTP_LENGTH", "3"],
    ["RATE_LIMIT_NUMBER", "5 per 600"],
    ["SPAM_LINE_TYPES", "PremiumRate,Cellular"],
    ["HTTP_HEADERS_TIMEOUT_MS", "500"],
    ["HTTP_REQUEST_TIMEOUT_MS", "1h"],
    // The fraud engine's second pass (decisions 9.4).
    ["FRAUD_NEW_DESTINATION_BUDGET", "0"],
    ["FRAUD_RETURNING_DAYS", "forever"],
    ["FRAUD_SOURCE_SENDS", "-1"],
    ["FRAUD_SOURCE_COUNTRIES", "2.5"],
    ["FRAUD_SOURCE_SHARE", "0.3"],
    ["FRAUD_COUNTRY_SPREAD", "0"],
    ["FRAUD_COUNTRY_SPREAD", "1.5"],
  ];
  for (const [name, value] of bad) {
    it(`stops with one line naming ${name} when it is ${JSON.stringify(value)}`, () => {
      expect(() => loadConfig({ [name]: value }))
        .to.throw(ConfigError)
        .with.property("message")
        .that.matches(new RegExp(`^invalid ${name}: [^\\n]+$`));
    });
  }

  const messageOf = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error("no error");
  };

  it("names the rule in words: ranges of numbers, choices, and the schema's own rules", () => {
    expect(messageOf({ GRPC_PORT: "http" })).to.equal(
      'invalid GRPC_PORT: must be a whole number from 0 to 65535 (got "http")',
    );
    expect(messageOf({ ACCESS_TOKEN_TTL_SECONDS: "59" })).to.equal(
      'invalid ACCESS_TOKEN_TTL_SECONDS: must be a whole number from 60 to 86400 (got "59")',
    );
    expect(messageOf({ OTP_LENGTH: "6.5" })).to.equal(
      'invalid OTP_LENGTH: must be a whole number from 4 to 10 (got "6.5")',
    );
    expect(messageOf({ SMS_PROVIDER: "pigeon" })).to.equal(
      'invalid SMS_PROVIDER: must be one of: log, http, smpp (got "pigeon")',
    );
    expect(messageOf({ SPAM_DISPOSABLE: "yes" })).to.equal(
      'invalid SPAM_DISPOSABLE: must be one of: true, false (got "yes")',
    );
    expect(messageOf({ RATE_LIMIT_NUMBER: "5 per 600" })).to.equal(
      'invalid RATE_LIMIT_NUMBER: must be count/seconds such as 5/600, or off (got "5 per 600")',
    );
    for (const name of ["GRPC_PORT", "HTTP_PORT", "ADMIN_PORT", "OTP_TTL_SECONDS", "WEBHOOK_CONCURRENCY"]) {
      expect(messageOf({ [name]: "NaN" }), name).to.not.match(/expected|received|Invalid input/);
    }
  });

  it("never shows a secret's value, nor a URL's password, in a start-up error", () => {
    const key = Buffer.alloc(20, 7).toString("base64");
    const secret = messageOf({ SECRETS_KEY: key });
    expect(secret).to.equal(
      "invalid SECRETS_KEY: must be 32 bytes in base64 (got a value (not shown: it is a secret))",
    );
    expect(secret).to.not.include(key);
    const redis = messageOf({ REDIS_URL: "http://admin:hunter2@redis:6379" });
    expect(redis).to.match(
      /^invalid REDIS_URL: must be a URL \(redis: or rediss:\) \(got "http:\/\/admin:\*\*\*@redis:6379\/?"\)$/,
    );
    expect(redis).to.not.include("hunter2");
    const smtp = messageOf({ SMTP_URL: "smtp//user:pa55word@mail" });
    expect(smtp).to.not.include("pa55word");
    expect(messageOf({ EMAIL_PROVIDER: "smtp", SMTP_URL: "http://u:topsecret@x" })).to.not.include(
      "topsecret",
    );
  });

  it("refuses the development SECRETS_KEY and the log SMS provider in production", () => {
    const key = Buffer.alloc(32, 7).toString("base64");
    const http = {
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: "http://127.0.0.1:9/sms",
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: "http://127.0.0.1:9/mail",
    };
    expect(() => loadConfig({ NODE_ENV: "production", ...http })).to.throw(
      ConfigError,
      /^invalid SECRETS_KEY/,
    );
    expect(() => loadConfig({ NODE_ENV: "production", SECRETS_KEY: key })).to.throw(
      ConfigError,
      /^invalid SMS_PROVIDER/,
    );
    const issuer = { ISSUER_URL: "https://auth.example.com" };
    expect(
      loadConfig({ NODE_ENV: "production", SECRETS_KEY: key, ...http, ...issuer }).devDefaults,
    ).to.deep.equal([]);
  });

  it("stops a production start without ISSUER_URL with one line naming it", () => {
    const ready = {
      NODE_ENV: "production",
      SECRETS_KEY: Buffer.alloc(32, 7).toString("base64"),
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: "http://127.0.0.1:9/sms",
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: "http://127.0.0.1:9/mail",
    };
    for (const unset of [{}, { ISSUER_URL: "" }]) {
      expect(() => loadConfig({ ...ready, ...unset }))
        .to.throw(ConfigError)
        .with.property("message")
        .that.matches(/^invalid ISSUER_URL: required when NODE_ENV=production [^\n]*$/);
    }
    expect(loadConfig({ ...ready, ISSUER_URL: "https://auth.example.com" }).ISSUER_URL).to.equal(
      "https://auth.example.com",
    );
    // Outside production the development default stays.
    expect(loadConfig({ NODE_ENV: "test" }).ISSUER_URL).to.equal("http://127.0.0.1:8080");
  });

  it("needs the provider's URL for the http and smpp SMS providers", () => {
    expect(() => loadConfig({ SMS_PROVIDER: "http" })).to.throw(ConfigError, /^invalid SMS_HTTP_URL/);
    expect(() => loadConfig({ SMS_PROVIDER: "smpp" })).to.throw(ConfigError, /^invalid SMPP_URL/);
  });

  it("reads windows, prices and off switches", () => {
    const c = loadConfig({
      RATE_LIMIT_IP: "off",
      SMS_PRICES: "default:0.05,FR:0.0725",
      SPAM_IP_NUMBERS: "2/60",
    });
    expect(c.RATE_LIMIT_IP).to.equal(null);
    expect(c.SMS_PRICES).to.deep.equal({ default: 50_000, FR: 72_500 });
    expect(c.SPAM_IP_NUMBERS).to.deep.equal({ limit: 2, windowSeconds: 60 });
  });
});
