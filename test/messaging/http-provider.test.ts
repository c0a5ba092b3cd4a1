import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { DeliveryError, HttpSmsProvider, type OutgoingSms } from "../../src/messaging/sms.js";

const message: OutgoingSms = {
  to: "+33612345678",
  from: "Ringfence",
  body: "Votre code de vérification est 482913. Il expire dans 10 minutes.",
  locale: "fr-FR",
  reference: "0f8c2f36-6c4e-4a55-9a43-4d1e0cbb0c11",
};

interface Received {
  method: string;
  /** The client's port: one per connection. */
  remotePort: number | undefined;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A real HTTP receiver on 127.0.0.1 that records each request and answers with `answer`. */
async function startReceiver(answer: (res: ServerResponse) => void) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({
        method: req.method ?? "",
        remotePort: req.socket.remotePort,
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sms`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

async function failureOf(p: Promise<unknown>): Promise<DeliveryError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(DeliveryError);
  return err as DeliveryError;
}

describe("HTTP SMS provider", () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
  afterEach(async () => {
    await receiver?.close();
    receiver = undefined;
  });

  it("POSTs exactly {to, from, body, locale, reference} as JSON, and keeps our reference, which its reports name", async () => {
    receiver = await startReceiver((res) => {
      res
        .writeHead(202, { "content-type": "application/json" })
        .end(JSON.stringify({ id: "prov-77", extra: 1 }));
    });
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 });
    expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
    expect(receiver.received).to.have.length(1);
    const [req] = receiver.received;
    expect(req!.method).to.equal("POST");
    expect(req!.headers["content-type"]).to.equal("application/json");
    expect(JSON.parse(req!.body)).to.deep.equal({
      to: "+33612345678",
      from: "Ringfence",
      body: "Votre code de vérification est 482913. Il expire dans 10 minutes.",
      locale: "fr-FR",
      reference: "0f8c2f36-6c4e-4a55-9a43-4d1e0cbb0c11",
    });
    expect(Object.keys(JSON.parse(req!.body) as object)).to.deep.equal([
      "to",
      "from",
      "body",
      "locale",
      "reference",
    ]);
  });

  it("answers our reference as the provider id when a 2xx answer has no string id", async () => {
    receiver = await startReceiver((res) => {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: 42 }));
    });
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 });
    expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
  });

  it("accepts a 204 without a body", async () => {
    receiver = await startReceiver((res) => res.writeHead(204).end());
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 });
    expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
  });

  it("fails with a DeliveryError naming the status, never the body, on a non-2xx answer", async () => {
    receiver = await startReceiver((res) => {
      res.writeHead(503, { "content-type": "text/plain" }).end(`cannot send ${message.body}`);
    });
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 });
    const err = await failureOf(provider.send(message));
    expect(err.message).to.equal("HTTP SMS provider answered 503");
    expect(err.retryable).to.equal(true);
  });

  it("marks a 4xx refusal as not worth retrying", async () => {
    receiver = await startReceiver((res) => res.writeHead(422).end());
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 });
    const err = await failureOf(provider.send(message));
    expect(err.message).to.equal("HTTP SMS provider answered 422");
    expect(err.retryable).to.equal(false);
  });

  it("fails with a DeliveryError when the provider does not answer within the timeout", async () => {
    receiver = await startReceiver(() => undefined); // never answers
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 200 });
    const started = Date.now();
    const err = await failureOf(provider.send(message));
    expect(err.message).to.equal("HTTP SMS provider did not answer within 200 ms");
    expect(Date.now() - started).to.be.below(2_000);
    // The request went out: the provider may have accepted it.
    expect(err.outcomeUnknown).to.equal(true);
  });

  it("fails with a DeliveryError when nothing listens", async () => {
    receiver = await startReceiver((res) => res.end());
    const url = receiver.url;
    await receiver.close();
    receiver = undefined;
    const err = await failureOf(new HttpSmsProvider(url, { timeoutMs: 2_000 }).send(message));
    expect(err.message).to.equal("HTTP SMS provider unreachable: ECONNREFUSED");
    expect(err.message).not.to.include("482913");
    // Nothing reached the provider: a refusal for sure.
    expect(err.outcomeUnknown).to.equal(false);
  });

  it("leaves the outcome unknown when the connection drops after the request went out", async () => {
    receiver = await startReceiver((res) => res.socket?.destroy());
    const err = await failureOf(new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 }).send(message));
    expect(err.message).to.match(/^HTTP SMS provider unreachable: /);
    expect(err.outcomeUnknown).to.equal(true);
  });

  it("follows no redirect: the other host gets nothing, and the outcome is unknown", async () => {
    const elsewhere = await startReceiver((res) => res.writeHead(200).end('{"id":"stolen"}'));
    try {
      receiver = await startReceiver((res) => res.writeHead(307, { location: elsewhere.url }).end());
      const err = await failureOf(new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 }).send(message));
      expect(err.message).to.equal("HTTP SMS provider answered a redirect (307), not followed");
      expect(err.retryable).to.equal(true);
      expect(err.outcomeUnknown).to.equal(true);
      expect(elsewhere.received).to.have.length(0);
    } finally {
      await elsewhere.close();
    }
  });

  it("takes a 2xx whose answer cannot be read for accepted, without the provider's id", async () => {
    receiver = await startReceiver((res) =>
      res.writeHead(200, { "content-type": "application/json" }).end("{not json"),
    );
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 });
    expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
  });

  it("keeps the connection open between messages: three sends, one connection", async () => {
    receiver = await startReceiver((res) =>
      res.writeHead(200, { "content-type": "application/json" }).end('{"id":"m"}'),
    );
    const provider = new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 });
    for (let i = 0; i < 3; i++) {
      expect(await provider.send(message)).to.deep.equal({ providerId: message.reference });
    }
    const ports = new Set(receiver.received.map((r) => r.remotePort));
    expect(receiver.received).to.have.length(3);
    expect(ports.size).to.equal(1);
  });

  it("knows a non-2xx answer for a refusal, not an unknown outcome", async () => {
    receiver = await startReceiver((res) => res.writeHead(503).end());
    const err = await failureOf(new HttpSmsProvider(receiver.url, { timeoutMs: 2_000 }).send(message));
    expect(err.outcomeUnknown).to.equal(false);
  });
});
