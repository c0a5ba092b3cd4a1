import type { AddressInfo } from "node:net";
import smpp from "smpp";

const ESME_RINVPASWD = 0x0000000e;

/** How the fake SMSC answers; tests change it between steps. */
export interface SmscBehaviour {
  /** command_status of submit_sm_resp (0: accepted). */
  submitStatus: number;
  /** Leave submit_sm without an answer. */
  ignoreSubmits: boolean;
  /** Leave enquire_link without an answer. */
  ignoreEnquireLinks: boolean;
}

/** A real SMPP server (the `smpp` package's) on 127.0.0.1 and a free port, with what it saw. */
export class FakeSmsc {
  readonly binds: { system_id: string; password: string; interface_version: number; accepted: boolean }[] =
    [];
  readonly submits: smpp.PDU[] = [];
  readonly enquireLinks: smpp.PDU[] = [];
  readonly unbinds: smpp.PDU[] = [];
  readonly behaviour: SmscBehaviour = { submitStatus: 0, ignoreSubmits: false, ignoreEnquireLinks: false };
  private nextId = 1;

  private constructor(
    private readonly server: smpp.Server,
    readonly port: number,
    readonly systemId: string,
    readonly password: string,
  ) {}

  static async start(systemId = "ringfence", password = "s3cret"): Promise<FakeSmsc> {
    const server = smpp.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const smsc = new FakeSmsc(server, (server.address() as AddressInfo).port, systemId, password);
    server.on("session", (session) => {
      smsc.serve(session);
    });
    return smsc;
  }

  url(password = this.password, systemId = this.systemId): string {
    return `smpp://${encodeURIComponent(systemId)}:${encodeURIComponent(password)}@127.0.0.1:${this.port}`;
  }

  /** Sessions that are bound and still open. */
  get sessions(): smpp.Session[] {
    return this.server.sessions.filter((s) => !s.socket.destroyed);
  }

  /** Sends a deliver_sm to the first open session; resolves with the deliver_sm_resp. */
  deliver(fields: Record<string, unknown>): Promise<smpp.PDU> {
    const session = this.sessions[0];
    if (session === undefined) return Promise.reject(new Error("no session to deliver to"));
    return new Promise((resolve) => {
      session.deliver_sm(fields, resolve);
    });
  }

  /** Sends an enquire_link to the first open session; resolves with its response. */
  enquireLink(): Promise<smpp.PDU> {
    const session = this.sessions[0];
    if (session === undefined) return Promise.reject(new Error("no session"));
    return new Promise((resolve) => {
      session.enquire_link({}, resolve);
    });
  }

  /** Drops every connection, as an SMSC restart would. */
  dropSessions(): void {
    for (const session of this.server.sessions) session.destroy();
  }

  async close(): Promise<void> {
    this.dropSessions();
    await new Promise<void>((resolve) =>
      this.server.close(() => {
        resolve();
      }),
    );
  }

  private serve(session: smpp.Session): void {
    session.socket.setNoDelay(true);
    session.on("error", () => undefined);
    session.on("bind_transceiver", (pdu) => {
      const accepted = pdu.system_id === this.systemId && pdu.password === this.password;
      this.binds.push({
        system_id: pdu.system_id ?? "",
        password: pdu.password ?? "",
        interface_version: pdu.interface_version ?? 0,
        accepted,
      });
      if (accepted) {
        session.send(pdu.response({ system_id: "fake-smsc" }));
      } else {
        session.send(pdu.response({ command_status: ESME_RINVPASWD }), () => {
          session.close();
        });
      }
    });
    session.on("submit_sm", (pdu) => {
      this.submits.push(pdu);
      if (this.behaviour.ignoreSubmits) return;
      const status = this.behaviour.submitStatus;
      session.send(
        pdu.response(status === 0 ? { message_id: `msg-${this.nextId++}` } : { command_status: status }),
      );
    });
    session.on("enquire_link", (pdu) => {
      this.enquireLinks.push(pdu);
      if (!this.behaviour.ignoreEnquireLinks) session.send(pdu.response());
    });
    session.on("unbind", (pdu) => {
      this.unbinds.push(pdu);
      session.send(pdu.response(), () => {
        session.close();
      });
    });
  }
}

/** Polls `condition` every 10 ms until it holds, or fails after `timeoutMs`. */
export async function eventually(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The text of a decoded short_message or message_payload. */
export function messageText(field: smpp.MessageField | undefined): string {
  if (field === undefined) return "";
  if (typeof field === "string") return field;
  if (Buffer.isBuffer(field)) return field.toString("latin1");
  return typeof field.message === "string" ? field.message : field.message.toString("latin1");
}
