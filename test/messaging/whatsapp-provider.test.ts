import { expect } from "chai";
import { DeliveryError, type OutgoingSms } from "../../src/messaging/provider.js";
import { parseDeliveryProviders } from "../../src/messaging/providers.js";
import { WhatsAppProvider } from "../../src/messaging/whatsapp-provider.js";
import { GraphFake, type GraphNumber, whatsappEntry } from "../support/graph-fake.js";

const NUMBER: GraphNumber = {
  phoneNumberId: "106540352242922",
  token: "EAAGraphAccessToken-provider-test-0123456789",
  appSecret: "app-secret-provider-test-0123456789",
};
const CODE = "482913";

const message: OutgoingSms = {
  to: "+33612345678",
  from: "Ringfence",
  body: `Votre code de vérification est ${CODE}.`,
  locale: "fr-FR",
  reference: "0f8c2f36-6c4e-4a55-9a43-4d1e0cbb0c11.1",
  code: CODE,
};

/** The provider a DELIVERY_PROVIDERS entry opens, pointed at `graph`. */
function providerFor(graph: GraphFake, over: Record<string, unknown> = {}): WhatsAppProvider {
  const [spec] = parseDeliveryProviders(
    JSON.stringify([
      whatsappEntry("wa", graph, NUMBER, "verify-token-provider-test-0123", {
        languages: { fr: "fr", pt: "pt_BR" },
        timeout_ms: 1_000,
        ...over,
      }),
    ]),
  );
  if (spec?.whatsapp === undefined) throw new Error("not a whatsapp entry");
  return new WhatsAppProvider({ ...spec, whatsapp: spec.whatsapp });
}

async function failureOf(p: Promise<unknown>): Promise<DeliveryError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(DeliveryError);
  return err as DeliveryError;
}

/** docs/routing.md#whatsapp: a code as Meta's authentication template, through the Cloud API. */
describe("WhatsApp provider (the Cloud API's template messages)", () => {
  let graph: GraphFake;
  beforeEach(async () => {
    graph = await GraphFake.start([NUMBER]);
  });
  afterEach(async () => {
    await graph.close();
  });

  it("POSTs the template with the code in its body and copy-code button, and keeps the wamid Graph answers", async () => {
    const sent = await providerFor(graph).send(message);
    expect(graph.messages).to.have.length(1);
    const [accepted] = graph.messages;
    expect(sent).to.deep.equal({ providerId: accepted?.id });
    expect(sent.providerId).to.match(/^wamid\./);
    const [request] = graph.requests;
    expect(request?.path).to.equal(`/v21.0/${NUMBER.phoneNumberId}/messages`);
    expect(request?.headers.authorization).to.equal(`Bearer ${NUMBER.token}`);
    expect(request?.headers["content-type"]).to.equal("application/json");
    expect(JSON.parse(request?.body ?? "")).to.deep.equal({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "33612345678",
      type: "template",
      template: {
        name: "verification_code",
        language: { code: "fr" },
        components: [
          { type: "body", parameters: [{ type: "text", text: CODE }] },
          { type: "button", sub_type: "url", index: "0", parameters: [{ type: "text", text: CODE }] },
        ],
      },
    });
  });

  it("picks the template's translation by the locale's language, else default_language (en_US by default)", async () => {
    const sentIn = async (provider: WhatsAppProvider, locale: string) => {
      await provider.send({ ...message, locale });
      return graph.messages.at(-1)?.body.template.language.code;
    };
    const provider = providerFor(graph);
    expect(await sentIn(provider, "pt-BR")).to.equal("pt_BR");
    expect(await sentIn(provider, "pt-PT")).to.equal("pt_BR");
    expect(await sentIn(provider, "fr-CA")).to.equal("fr");
    expect(await sentIn(provider, "de-DE")).to.equal("en_US");
    expect(await sentIn(provider, "en-US")).to.equal("en_US");
    const spanish = providerFor(graph, { languages: undefined, default_language: "es_MX" });
    expect(await sentIn(spanish, "fr-FR")).to.equal("es_MX");
  });

  it("is checked against a Graph fake that refuses, as Graph does, a body not of Meta's template shape", async () => {
    const send = (body: unknown) =>
      fetch(`${graph.url}/${NUMBER.phoneNumberId}/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${NUMBER.token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    await providerFor(graph).send(message);
    const good = JSON.parse(graph.requests[0]?.body ?? "") as { template: { components: unknown[] } };
    const withoutButton = {
      ...good,
      template: { ...good.template, components: good.template.components.slice(0, 1) },
    };
    for (const body of [withoutButton, { ...good, type: "text" }, { ...good, extra: 1 }]) {
      const res = await send(body);
      expect(res.status).to.equal(400);
      const answer = (await res.json()) as { error: Record<string, unknown> };
      expect(answer.error).to.include({
        message: "(#100) Invalid parameter",
        type: "OAuthException",
        code: 100,
      });
      expect(answer.error.fbtrace_id).to.be.a("string");
    }
    expect(graph.messages).to.have.length(1);
  });

  it("takes a Graph base URL with a trailing slash", async () => {
    await providerFor(graph, { url: `${graph.url}/` }).send(message);
    expect(graph.requests.map((r) => r.path)).to.deep.equal([`/v21.0/${NUMBER.phoneNumberId}/messages`]);
  });

  it("refuses for good a message without its code, and sends nothing", async () => {
    const { code: _code, ...withoutCode } = message;
    const err = await failureOf(providerFor(graph).send(withoutCode));
    expect(err.message).to.equal("WhatsApp provider needs the code of the message for its template");
    expect(err.retryable).to.equal(false);
    expect(err.outcomeUnknown).to.equal(false);
    expect(graph.requests).to.have.length(0);
  });

  it("takes Graph's 400 for a refusal for good, naming its error code, never the code or the token", async () => {
    graph.answer = () => ({
      status: 400,
      error: {
        message: "(#132001) Template name does not exist in the translation",
        type: "OAuthException",
        code: 132001,
      },
    });
    const err = await failureOf(providerFor(graph).send(message));
    expect(err.message).to.equal(
      "WhatsApp provider answered 400 (Graph error 132001: (#132001) Template name does not exist in the translation)",
    );
    expect(err.retryable).to.equal(false);
    expect(err.outcomeUnknown).to.equal(false);
  });

  it("leaves out Graph's text when it repeats the code", async () => {
    graph.answer = () => ({
      status: 400,
      error: { message: `(#100) Invalid parameter ${CODE}`, type: "OAuthException", code: 100 },
    });
    const err = await failureOf(providerFor(graph).send(message));
    expect(err.message).to.equal("WhatsApp provider answered 400 (Graph error 100)");
    expect(err.message).to.not.include(CODE);
  });

  it("refuses for good what Graph itself finds malformed, and a wrong token", async () => {
    const wrongToken = await failureOf(
      providerFor(graph, { token: "EAAWrongToken-0123456789abcdef" }).send(message),
    );
    expect(wrongToken.message).to.equal(
      "WhatsApp provider answered 401 (Graph error 190: Invalid OAuth access token - Cannot parse access token)",
    );
    expect(wrongToken.retryable).to.equal(false);
    expect(wrongToken.message).to.not.include("EAAWrongToken");
    const unknownNumber = await failureOf(providerFor(graph, { phone_number_id: "999" }).send(message));
    expect(unknownNumber.message).to.match(
      /^WhatsApp provider answered 400 \(Graph error 100: Unsupported post request/,
    );
    expect(unknownNumber.retryable).to.equal(false);
  });

  it("takes throttling for a passing refusal: 429, and Graph's throttling codes under a 400", async () => {
    const throttles: [number, number][] = [
      [429, 130429],
      [400, 131056],
      [400, 4],
      [400, 80007],
      [400, 131048],
    ];
    for (const [status, code] of throttles) {
      graph.answer = () => ({
        status,
        error: { message: "(#131056) Pair rate limit hit", type: "OAuthException", code },
      });
      const err = await failureOf(providerFor(graph).send(message));
      expect(err.message, String(code)).to.match(
        new RegExp(`^WhatsApp provider answered ${status} \\(Graph error ${code}`),
      );
      expect(err.retryable, String(code)).to.equal(true);
      expect(err.outcomeUnknown, String(code)).to.equal(false);
    }
  });

  it("takes a 5xx for a passing refusal, with or without Graph's error body", async () => {
    graph.answer = () => ({
      status: 500,
      error: { message: "(#1) An unknown error occurred", type: "OAuthException", code: 1 },
    });
    const err = await failureOf(providerFor(graph).send(message));
    expect(err.message).to.equal(
      "WhatsApp provider answered 500 (Graph error 1: (#1) An unknown error occurred)",
    );
    expect(err.retryable).to.equal(true);
    graph.answer = () => ({ status: 503 });
    const bare = await failureOf(providerFor(graph).send(message));
    expect(bare.message).to.equal("WhatsApp provider answered 503");
    expect(bare.retryable).to.equal(true);
    expect(bare.outcomeUnknown).to.equal(false);
  });

  it("leaves the outcome unknown when Graph does not answer within timeout_ms", async () => {
    graph.answer = () => "hang";
    const started = Date.now();
    const err = await failureOf(providerFor(graph, { timeout_ms: 200 }).send(message));
    expect(err.message).to.equal("WhatsApp provider did not answer within 200 ms");
    expect(err.outcomeUnknown).to.equal(true);
    expect(err.retryable).to.equal(true);
    expect(Date.now() - started).to.be.below(2_000);
  });

  it("knows nothing reached Graph when nothing listens", async () => {
    const provider = providerFor(graph);
    await graph.close();
    const err = await failureOf(provider.send(message));
    expect(err.message).to.equal("WhatsApp provider unreachable: ECONNREFUSED");
    expect(err.outcomeUnknown).to.equal(false);
    graph = await GraphFake.start([NUMBER]);
  });
});
