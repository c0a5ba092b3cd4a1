import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A real HTTP receiver on loopback that records every request. `answer` decides the status
 * (default 200), so a test can make it fail for a while.
 */
export class Receiver {
  readonly received: Received[] = [];
  answer: (r: Received) => number = () => 200;
  private waiters: { pred: (r: Received[]) => boolean; resolve: () => void }[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<Receiver> {
    const ref: { self?: Receiver } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const r = {
          path: req.url ?? "/",
          headers: req.headers,
          body: Buffer.concat(chunks).toString("utf8"),
        };
        const status = ref.self?.answer(r) ?? 200;
        if (status >= 200 && status < 300) ref.self?.record(r);
        res.statusCode = status;
        res.setHeader("content-type", "application/json");
        res.end(status < 300 ? "{}" : '{"error":"down"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new Receiver(server, `http://127.0.0.1:${port}/hook`);
    ref.self = self;
    return self;
  }

  private record(r: Received): void {
    this.received.push(r);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(this.received)) return true;
      w.resolve();
      return false;
    });
  }

  /** Waits until the accepted requests satisfy `pred`. */
  async until(pred: (r: Received[]) => boolean, timeoutMs = 10_000): Promise<Received[]> {
    if (!pred(this.received)) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`receiver: timed out with ${this.received.length} requests`));
        }, timeoutMs);
        this.waiters.push({
          pred,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    }
    return this.received;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

export interface SmsMessage {
  to: string;
  from: string;
  body: string;
  locale: string;
  reference: string;
}

/** The SMS gateway the `http` provider posts to; reads the code back out of a message. */
export class SmsReceiver {
  private constructor(readonly receiver: Receiver) {}

  static async start(): Promise<SmsReceiver> {
    return new SmsReceiver(await Receiver.start());
  }

  get url(): string {
    return this.receiver.url;
  }

  get messages(): SmsMessage[] {
    return this.receiver.received.map((r) => JSON.parse(r.body) as SmsMessage);
  }

  /** The nth message (0-based) once it has arrived. */
  async message(n: number): Promise<SmsMessage> {
    await this.receiver.until((r) => r.length > n);
    const m = this.messages[n];
    if (m === undefined) throw new Error("no message");
    return m;
  }

  /** The code in a message: the run of digits the decisions file promises. */
  static code(m: SmsMessage): string {
    const found = /\b(\d{4,10})\b/.exec(m.body);
    if (found?.[1] === undefined) throw new Error(`no code in "${m.body}"`);
    return found[1];
  }

  close(): Promise<void> {
    return this.receiver.close();
  }
}

/** An SMS provider that takes `delayMs` to accept each message, recording its reference on arrival. */
export async function slowProvider(delayMs: number) {
  const references: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      references.push(
        (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { reference: string }).reference,
      );
      setTimeout(() => {
        res.setHeader("content-type", "application/json");
        res.end("{}");
      }, delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sms`,
    references,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
