import { expect } from "chai";
import { ConfigError, loadConfig } from "../../src/config.js";
import { deliveryProviders } from "../../src/messaging/settings.js";

const HTTP = "http://127.0.0.1:9/sms";
const PASSWORD = "smpp-pass-never-shown";
const TOKEN = "status-token-never-shown-0123456789";
const SMPP = `smpp://ringfence:${PASSWORD}@127.0.0.1:2775`;

/** The one line a start is refused with; fails when the start is not refused. */
function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`started with ${JSON.stringify(env)}`);
}

const list = (...entries: unknown[]) => JSON.stringify(entries);

/**
 * docs/routing.md#providers (9.2, rows `DELIVERY_PROVIDERS` and "Back compatibility"): a bad entry
 * stops the start with one line naming the entry and the field; with SMS_PROVIDER too, one line
 * naming both.
 */
describe("DELIVERY_PROVIDERS at start (9.2 rows DELIVERY_PROVIDERS and Back compatibility)", () => {
  const refused: [string, string, RegExp][] = [
    ["not JSON", "[{name: alpha}]", /^invalid DELIVERY_PROVIDERS: must be a JSON array of providers/],
    [
      "not an array",
      JSON.stringify({ name: "alpha", url: HTTP }),
      /^invalid DELIVERY_PROVIDERS: must be a JSON array/,
    ],
    ["an empty array", "[]", /^invalid DELIVERY_PROVIDERS: must be a JSON array of at least one provider/],
    [
      "an entry that is not an object",
      list("alpha"),
      /^invalid DELIVERY_PROVIDERS: entry 0: must be an object/,
    ],
    [
      "a name with capitals",
      list({ name: "Alpha", url: HTTP }),
      /^invalid DELIVERY_PROVIDERS: entry 0: name /,
    ],
    ["a name of 33 characters", list({ name: "a".repeat(33), url: HTTP }), /: entry 0: name /],
    ["a name with a dot", list({ name: "alpha.eu", url: HTTP }), /: entry 0: name /],
    ["no name", list({ url: HTTP }), /: entry 0: name /],
    [
      "a name used twice",
      list({ name: "alpha", url: HTTP }, { name: "beta", url: HTTP }, { name: "alpha", url: HTTP }),
      /^invalid DELIVERY_PROVIDERS: entry 2 \(alpha\): name is used by an earlier entry/,
    ],
    [
      "an unknown field",
      list({ name: "alpha", url: HTTP, timeout: 300 }),
      /^invalid DELIVERY_PROVIDERS: entry 0 \(alpha\): timeout is not a field of a provider/,
    ],
    [
      "an unknown channel",
      list({ name: "alpha", url: HTTP }, { name: "beta", channel: "fax", url: HTTP }),
      /^invalid DELIVERY_PROVIDERS: entry 1 \(beta\): channel must be one of sms, voice, whatsapp/,
    ],
    [
      "a channel that is not a string",
      list({ name: "alpha", channel: 1, url: HTTP }),
      /: entry 0 \(alpha\): channel /,
    ],
    ["an ftp url", list({ name: "alpha", url: "ftp://127.0.0.1/sms" }), /: entry 0 \(alpha\): url must be /],
    ["no url", list({ name: "alpha" }), /: entry 0 \(alpha\): url must be /],
    [
      "an smpp url without port",
      list({ name: "alpha", url: `smpp://u:${PASSWORD}@127.0.0.1` }),
      /: entry 0 \(alpha\): url /,
    ],
    [
      "an smpp url without system_id",
      list({ name: "alpha", url: "smpp://127.0.0.1:2775" }),
      /: entry 0 \(alpha\): url /,
    ],
    [
      "a cost that is not an object",
      list({ name: "alpha", url: HTTP, cost: 0.04 }),
      /: entry 0 \(alpha\): cost must be an object/,
    ],
    [
      "a negative cost",
      list({ name: "alpha", url: HTTP, cost: { FR: -1 } }),
      /: entry 0 \(alpha\): cost: FR must be a number/,
    ],
    [
      "a cost as a string",
      list({ name: "alpha", url: HTTP, cost: { default: "0.04" } }),
      /: entry 0 \(alpha\): cost: default /,
    ],
    [
      "a cost for no country",
      list({ name: "alpha", url: HTTP, cost: { France: 0.03 } }),
      /: entry 0 \(alpha\): cost: France /,
    ],
    [
      "a timeout below 100 ms",
      list({ name: "alpha", url: HTTP, timeout_ms: 99 }),
      /: entry 0 \(alpha\): timeout_ms /,
    ],
    [
      "a timeout above 60000 ms",
      list({ name: "alpha", url: SMPP, timeout_ms: 60_001 }),
      /: entry 0 \(alpha\): timeout_ms /,
    ],
    [
      "a timeout with a fraction",
      list({ name: "alpha", url: HTTP, timeout_ms: 150.5 }),
      /: entry 0 \(alpha\): timeout_ms /,
    ],
    [
      "a timeout as a string",
      list({ name: "alpha", url: HTTP, timeout_ms: "300" }),
      /: entry 0 \(alpha\): timeout_ms /,
    ],
    [
      "a status_token on an smpp provider",
      list({ name: "alpha", url: SMPP, status_token: TOKEN }),
      /^invalid DELIVERY_PROVIDERS: entry 0 \(alpha\): status_token is for http providers/,
    ],
    [
      "a status_token too short",
      list({ name: "alpha", url: HTTP, status_token: "short" }),
      /: entry 0 \(alpha\): status_token /,
    ],
  ];
  for (const [what, value, line] of refused) {
    it(`refuses ${what} with one line naming where it is wrong`, () => {
      const message = refusal({ DELIVERY_PROVIDERS: value });
      expect(message).to.match(line);
      expect(message, "one line").to.not.include("\n");
      expect(message, "no secret quoted").to.not.include(PASSWORD).and.not.include(TOKEN);
    });
  }

  it("refuses DELIVERY_PROVIDERS together with SMS_PROVIDER, naming both", () => {
    const message = refusal({
      DELIVERY_PROVIDERS: list({ name: "alpha", url: HTTP }),
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: HTTP,
    });
    expect(message).to.match(/^invalid DELIVERY_PROVIDERS: /);
    expect(message).to.include("SMS_PROVIDER");
    expect(message).to.not.include("\n");
  });

  it("takes good entries: sms by default, each kind's default timeout, its cost and token", () => {
    const config = loadConfig({
      DELIVERY_PROVIDERS: list(
        { name: "alpha", url: HTTP, cost: { default: 0.04, FR: 0.031 }, status_token: TOKEN },
        { name: "sigma-2", channel: "sms", url: SMPP, timeout_ms: 100 },
        { name: "b", url: "https://sms.example.com/send", timeout_ms: 60_000 },
      ),
    });
    expect(deliveryProviders(config)).to.deep.equal([
      {
        name: "alpha",
        channel: "sms",
        kind: "http",
        url: HTTP,
        cost: { default: 0.04, FR: 0.031 },
        timeoutMs: 5_000,
        statusToken: TOKEN,
      },
      {
        name: "sigma-2",
        channel: "sms",
        kind: "smpp",
        url: SMPP,
        cost: {},
        timeoutMs: 100,
        statusToken: undefined,
      },
      {
        name: "b",
        channel: "sms",
        kind: "http",
        url: "https://sms.example.com/send",
        cost: {},
        timeoutMs: 60_000,
        statusToken: undefined,
      },
    ]);
    expect(
      deliveryProviders(loadConfig({ DELIVERY_PROVIDERS: list({ name: "s", url: SMPP }) }))[0]?.timeoutMs,
    ).to.equal(10_000);
  });

  it("without DELIVERY_PROVIDERS, makes SMS_PROVIDER one sms provider named default", () => {
    const http = deliveryProviders(loadConfig({ SMS_PROVIDER: "http", SMS_HTTP_URL: HTTP }));
    expect(http.map((p) => [p.name, p.channel, p.kind, p.url])).to.deep.equal([
      ["default", "sms", "http", HTTP],
    ]);
    const smpp = deliveryProviders(loadConfig({ SMS_PROVIDER: "smpp", SMPP_URL: SMPP }));
    expect(smpp.map((p) => [p.name, p.channel, p.kind, p.url])).to.deep.equal([
      ["default", "sms", "smpp", SMPP],
    ]);
  });

  it("keeps the older names of message ids for the provider named default, so receipts in flight still match", () => {
    const old = deliveryProviders(loadConfig({ SMS_PROVIDER: "smpp", SMPP_URL: SMPP }));
    expect(old.map((p) => p.formerNames)).to.deep.equal([["smpp"]]);
    const moved = deliveryProviders(
      loadConfig({
        DELIVERY_PROVIDERS: JSON.stringify([
          { name: "default", url: SMPP },
          { name: "other", url: HTTP },
        ]),
      }),
    );
    expect(moved.map((p) => p.formerNames)).to.deep.equal([["smpp"], undefined]);
  });

  it("starts in production with DELIVERY_PROVIDERS alone: SMS_PROVIDER's development default is moot", () => {
    const production = {
      NODE_ENV: "production",
      SECRETS_KEY: Buffer.alloc(32, 7).toString("base64"),
      ISSUER_URL: "https://auth.example.com",
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: HTTP,
    };
    const config = loadConfig({
      ...production,
      DELIVERY_PROVIDERS: JSON.stringify([{ name: "a", url: HTTP }]),
    });
    expect(config.devDefaults).to.not.include("SMS_PROVIDER");
    expect(() => loadConfig(production)).to.throw(
      ConfigError,
      /invalid SMS_PROVIDER: .*refused when NODE_ENV=production/,
    );
  });
});
