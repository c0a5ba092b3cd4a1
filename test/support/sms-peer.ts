import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { SmsMessage } from "./receivers.js";

/**
 * An HTTP SMS provider on loopback that records every message posted to it, whatever it answers,
 * and answers each as `answer` says: a status, or nothing at all (`hang`, until the sender gives up).
 */
export class SmsPeer {
  readonly messages: SmsMessage[] = [];
  answer: (m: SmsMessage) => number | "hang" = () => 200;
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<SmsPeer> {
    const ref: { self?: SmsPeer } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const message = JSON.parse(Buffer.concat(chunks).toString("utf8")) as SmsMessage;
        ref.self?.messages.push(message);
        const answer = ref.self?.answer(message) ?? 200;
        if (answer === "hang") return;
        res.statusCode = answer;
        res.setHeader("content-type", "application/json");
        res.end(answer < 300 ? "{}" : '{"error":"refused"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new SmsPeer(server, `http://127.0.0.1:${String(port)}/sms`);
    ref.self = self;
    return self;
  }

  /** How many times a message of `reference` was posted here. */
  count(reference: string): number {
    return this.messages.filter((m) => m.reference === reference).length;
  }

  /** The messages posted here to `phone`. */
  to(phone: string): SmsMessage[] {
    return this.messages.filter((m) => m.to === phone);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
