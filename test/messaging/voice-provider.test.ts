import { expect } from "chai";
import { DeliveryError, type OutgoingSms } from "../../src/messaging/provider.js";
import { openProviders, parseDeliveryProviders } from "../../src/messaging/providers.js";
import { silentLogger } from "../../src/log.js";
import { Receiver } from "../support/receivers.js";

const message: OutgoingSms = {
  to: "+33612345678",
  from: "Ringfence",
  body: "Votre code de vérification est : 4, 8, 2, 9, 1, 3.",
  locale: "fr-FR",
  reference: "0f8c2f36-6c4e-4a55-9a43-4d1e0cbb0c11.2",
  code: "482913",
};

/** docs/routing.md#providers: a `voice` entry is an http provider whose body says `text`. */
describe("voice provider (an http provider of the voice channel)", () => {
  let receiver: Receiver;
  beforeEach(async () => {
    receiver = await Receiver.start();
  });
  afterEach(async () => {
    await receiver.close();
  });

  const open = () => {
    const specs = parseDeliveryProviders(
      JSON.stringify([{ name: "call", channel: "voice", url: receiver.url, timeout_ms: 1_000 }]),
    );
    const [provider] = openProviders(specs, { log: silentLogger });
    if (provider === undefined) throw new Error("no provider");
    return provider;
  };

  it("POSTs exactly {to, from, text, locale, reference}, text being the message's body, and keeps our reference", async () => {
    const provider = open();
    expect(provider.name).to.equal("call");
    expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
    const [request] = receiver.received;
    expect(request?.headers["content-type"]).to.equal("application/json");
    const body = JSON.parse(request?.body ?? "") as Record<string, unknown>;
    expect(Object.keys(body)).to.deep.equal(["to", "from", "text", "locale", "reference"]);
    expect(body).to.deep.equal({
      to: "+33612345678",
      from: "Ringfence",
      text: "Votre code de vérification est : 4, 8, 2, 9, 1, 3.",
      locale: "fr-FR",
      reference: message.reference,
    });
  });

  it("fails as the http providers do: a 4xx for good, a 5xx for a while, naming the status only", async () => {
    receiver.answer = () => 422;
    const refused = await open()
      .send(message)
      .catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(DeliveryError);
    expect((refused as DeliveryError).message).to.equal("voice provider answered 422");
    expect((refused as DeliveryError).retryable).to.equal(false);
    receiver.answer = () => 503;
    const down = await open()
      .send(message)
      .catch((e: unknown) => e);
    expect((down as DeliveryError).message).to.equal("voice provider answered 503");
    expect((down as DeliveryError).retryable).to.equal(true);
  });
});
