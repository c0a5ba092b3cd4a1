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

const GRAPH = "https://graph.facebook.com/v21.0";
const GRAPH_TOKEN = "EAAGraphAccessTokenNeverShown0123456789";
const APP_SECRET = "app-secret-never-shown-0123456789";
const VERIFY_TOKEN = "verify-token-never-shown-0123456789";
/** A WhatsApp entry with every required field, `over` changing or adding some. */
const whatsapp = (over: Record<string, unknown> = {}) => ({
  name: "wa",
  channel: "whatsapp",
  url: GRAPH,
  phone_number_id: "106540352242922",
  token: GRAPH_TOKEN,
  template: "verification_code",
  app_secret: APP_SECRET,
  verify_token: VERIFY_TOKEN,
  ...over,
});
/** `entry` without `field`. */
const without = (entry: Record<string, unknown>, field: string) =>
  Object.fromEntries(Object.entries(entry).filter(([k]) => k !== field));

/** docs/routing.md#providers: voice entries (the http contract) and whatsapp entries (the Cloud API). */
describe("DELIVERY_PROVIDERS voice and whatsapp entries", () => {
  const refused: [string, unknown[], RegExp][] = [
    [
      "a voice entry with an smpp url",
      [{ name: "call", channel: "voice", url: SMPP }],
      /^invalid DELIVERY_PROVIDERS: entry 0 \(call\): url must be an http\(s\) URL/,
    ],
    [
      "a voice entry with a status_token too short",
      [{ name: "call", channel: "voice", url: HTTP, status_token: "short" }],
      /: entry 0 \(call\): status_token must be a string of 16 to 256 characters/,
    ],
    [
      "a voice entry with a WhatsApp field",
      [{ name: "call", channel: "voice", url: HTTP, template: "verification_code" }],
      /: entry 0 \(call\): template is for whatsapp providers only/,
    ],
    [
      "an sms entry with a WhatsApp field",
      [{ name: "alpha", url: HTTP, phone_number_id: "106540352242922" }],
      /: entry 0 \(alpha\): phone_number_id is for whatsapp providers only/,
    ],
    [
      "a whatsapp entry with a status_token",
      [whatsapp({ status_token: TOKEN })],
      /: entry 0 \(wa\): status_token is not for whatsapp providers: their statuses come on the webhook/,
    ],
    [
      "a whatsapp entry with an smpp url",
      [whatsapp({ url: SMPP })],
      /: entry 0 \(wa\): url must be the Graph API's http\(s\) base URL, such as https:\/\/graph\.facebook\.com\/v21\.0/,
    ],
    [
      "a whatsapp entry without url",
      [without(whatsapp(), "url")],
      /: entry 0 \(wa\): url must be the Graph API/,
    ],
    [
      "a whatsapp entry without phone_number_id",
      [without(whatsapp(), "phone_number_id")],
      /: entry 0 \(wa\): phone_number_id must be the phone number's id, its digits as a JSON string/,
    ],
    [
      "a phone_number_id as a JSON number",
      [whatsapp({ phone_number_id: 106540352242922 })],
      /: entry 0 \(wa\): phone_number_id must be /,
    ],
    [
      "a phone_number_id with letters",
      [whatsapp({ phone_number_id: "10654x" })],
      /: entry 0 \(wa\): phone_number_id /,
    ],
    [
      "a whatsapp entry without token",
      [without(whatsapp(), "token")],
      /: entry 0 \(wa\): token must be the access token, 16 to 4096 characters without spaces/,
    ],
    ["a token too short", [whatsapp({ token: "EAA123" })], /: entry 0 \(wa\): token must be /],
    [
      "a token with a space",
      [whatsapp({ token: `Bearer ${GRAPH_TOKEN}` })],
      /: entry 0 \(wa\): token must be /,
    ],
    [
      "a template with capitals",
      [whatsapp({ template: "Verification_Code" })],
      /: entry 0 \(wa\): template must be the template's name, 1 to 512 of a-z, 0-9 and _/,
    ],
    ["an empty template", [whatsapp({ template: "" })], /: entry 0 \(wa\): template must be /],
    [
      "a template of 513 characters",
      [whatsapp({ template: "a".repeat(513) })],
      /: entry 0 \(wa\): template /,
    ],
    [
      "a whatsapp entry without app_secret",
      [without(whatsapp(), "app_secret")],
      /: entry 0 \(wa\): app_secret must be a string of 16 to 256 characters/,
    ],
    ["an app_secret too short", [whatsapp({ app_secret: "0123456789" })], /: entry 0 \(wa\): app_secret /],
    [
      "a whatsapp entry without verify_token",
      [without(whatsapp(), "verify_token")],
      /: entry 0 \(wa\): verify_token must be a string of 16 to 256 characters/,
    ],
    [
      "a verify_token as a number",
      [whatsapp({ verify_token: 1234567890123456 })],
      /: entry 0 \(wa\): verify_token /,
    ],
    [
      "languages that are not an object",
      [whatsapp({ languages: ["fr"] })],
      /: entry 0 \(wa\): languages must be an object such as \{"fr": "fr", "pt": "pt_BR"\}/,
    ],
    [
      "languages keyed by a whole locale",
      [whatsapp({ languages: { "pt-BR": "pt_BR" } })],
      /: entry 0 \(wa\): languages: pt-BR is not a language subtag such as fr/,
    ],
    [
      "a language code Meta does not spell so",
      [whatsapp({ languages: { pt: "pt-BR" } })],
      /: entry 0 \(wa\): languages: pt must be Meta's code of a template language, such as fr or pt_BR/,
    ],
    [
      "a default_language Meta does not spell so",
      [whatsapp({ default_language: "english" })],
      /: entry 0 \(wa\): default_language must be Meta's code of a template language, such as en_US/,
    ],
    ["a whatsapp timeout below 100 ms", [whatsapp({ timeout_ms: 50 })], /: entry 0 \(wa\): timeout_ms /],
    [
      "two whatsapp entries of one phone number",
      [whatsapp(), whatsapp({ name: "wa-2" })],
      /^invalid DELIVERY_PROVIDERS: entry 1 \(wa-2\): phone_number_id is used by an earlier entry/,
    ],
  ];
  for (const [what, entries, line] of refused) {
    it(`refuses ${what} with one line naming the entry and the field, quoting no secret`, () => {
      const message = refusal({ DELIVERY_PROVIDERS: list(...entries) });
      expect(message).to.match(line);
      expect(message, "one line").to.not.include("\n");
      for (const secret of [PASSWORD, TOKEN, GRAPH_TOKEN, APP_SECRET, VERIFY_TOKEN]) {
        expect(message, "no secret quoted").to.not.include(secret);
      }
    });
  }

  it("takes a voice entry as an http provider of the voice channel, with its reports' token", () => {
    const config = loadConfig({
      DELIVERY_PROVIDERS: list({
        name: "call",
        channel: "voice",
        url: HTTP,
        cost: { FR: 0.1 },
        status_token: TOKEN,
      }),
    });
    expect(deliveryProviders(config)).to.deep.equal([
      {
        name: "call",
        channel: "voice",
        kind: "http",
        url: HTTP,
        cost: { FR: 0.1 },
        timeoutMs: 5_000,
        statusToken: TOKEN,
      },
    ]);
  });

  it("takes whatsapp entries as Graph providers with their account, en_US by default, and tells them apart by phone number", () => {
    const config = loadConfig({
      DELIVERY_PROVIDERS: list(
        { name: "alpha", url: HTTP },
        whatsapp({ cost: { default: 0.02 } }),
        whatsapp({
          name: "wa-br",
          url: "http://127.0.0.1:9/graph/",
          phone_number_id: "200000000000001",
          languages: { fr: "fr", pt: "pt_BR", zh: "zh_HK" },
          default_language: "es_MX",
          timeout_ms: 2_500,
        }),
      ),
    });
    const [, wa, br] = deliveryProviders(config);
    expect(wa).to.deep.equal({
      name: "wa",
      channel: "whatsapp",
      kind: "graph",
      url: GRAPH,
      cost: { default: 0.02 },
      timeoutMs: 5_000,
      whatsapp: {
        phoneNumberId: "106540352242922",
        token: GRAPH_TOKEN,
        template: "verification_code",
        appSecret: APP_SECRET,
        verifyToken: VERIFY_TOKEN,
        languages: {},
        defaultLanguage: "en_US",
      },
    });
    expect(br).to.deep.include({ name: "wa-br", kind: "graph", timeoutMs: 2_500 });
    expect(br?.whatsapp).to.deep.include({
      phoneNumberId: "200000000000001",
      languages: { fr: "fr", pt: "pt_BR", zh: "zh_HK" },
      defaultLanguage: "es_MX",
    });
  });
});
