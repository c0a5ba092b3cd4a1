import { createHmac, randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";

/** A business phone number the fake serves: its id, the token that may send, its app's secret. */
export interface GraphNumber {
  phoneNumberId: string;
  token: string;
  appSecret: string;
  displayPhoneNumber?: string;
}

/** Every request the fake got, whatever it answered. */
export interface GraphRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A message the fake accepted, with the id it answered. */
export interface GraphMessage {
  id: string;
  phoneNumberId: string;
  /** The request's JSON, as sent. */
  body: SendBody;
}

/** Graph's error answer (`{error: {message, type, code, error_subcode, fbtrace_id}}`). */
export interface GraphError {
  message: string;
  type: string;
  code: number;
  error_subcode?: number;
}

/** How the fake answers one valid message: accepted, refused with Graph's error, or never. */
export type GraphAnswer = "accept" | "hang" | { status: number; error?: GraphError };

const Text = z.strictObject({ type: z.literal("text"), text: z.string().min(1) });

/** A template send as Meta documents it for a copy-code authentication template. */
const SendSchema = z.strictObject({
  messaging_product: z.literal("whatsapp"),
  recipient_type: z.literal("individual").optional(),
  to: z.string().regex(/^\+?\d{6,15}$/),
  type: z.literal("template"),
  template: z.strictObject({
    name: z.string().regex(/^[a-z0-9_]{1,512}$/),
    language: z.strictObject({ code: z.string().min(2) }),
    components: z.tuple([
      z.strictObject({ type: z.literal("body"), parameters: z.array(Text).length(1) }),
      z.strictObject({
        type: z.literal("button"),
        sub_type: z.literal("url"),
        index: z.literal("0"),
        parameters: z.array(Text).length(1),
      }),
    ]),
  }),
});
export type SendBody = z.infer<typeof SendSchema>;

const API_VERSION = "v21.0";
const WABA_ID = "102290129340398";

/**
 * The WhatsApp Cloud API on loopback, as Meta documents it: `POST /{version}/{phone_number_id}/messages`
 * with the number's bearer token and a template message, answered with the message's `wamid`;
 * Graph's error JSON for a wrong token, an unknown number or a malformed body. It can also play
 * Meta's side of the webhook: signed status notifications of the messages it accepted.
 */
export class GraphFake {
  readonly requests: GraphRequest[] = [];
  readonly messages: GraphMessage[] = [];
  answer: (m: SendBody) => GraphAnswer = () => "accept";

  private constructor(
    private readonly server: Server,
    /** The Graph API base URL, as an entry's `url` gives it. */
    readonly url: string,
    private readonly numbers: ReadonlyMap<string, GraphNumber>,
  ) {}

  static async start(numbers: readonly GraphNumber[]): Promise<GraphFake> {
    const ref: { self?: GraphFake } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const request = {
          method: req.method ?? "",
          path: req.url ?? "/",
          headers: req.headers,
          body: Buffer.concat(chunks).toString("utf8"),
        };
        const answer = ref.self?.handle(request);
        if (answer === undefined) return; // hangs until closed
        res.writeHead(answer.status, { "content-type": "application/json" }).end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new GraphFake(
      server,
      `http://127.0.0.1:${port}/${API_VERSION}`,
      new Map(numbers.map((n) => [n.phoneNumberId, n])),
    );
    ref.self = self;
    return self;
  }

  private handle(r: GraphRequest): { status: number; body: unknown } | undefined {
    this.requests.push(r);
    const path = new RegExp(`^/${API_VERSION.replace(".", "\\.")}/([0-9]+)/messages$`).exec(r.path);
    const number = path?.[1] === undefined ? undefined : this.numbers.get(path[1]);
    if (r.method !== "POST" || path?.[1] === undefined || number === undefined) {
      return graphError(400, {
        message: `Unsupported post request. Object with ID '${path?.[1] ?? r.path}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
        type: "GraphMethodException",
        code: 100,
        error_subcode: 33,
      });
    }
    if (r.headers.authorization !== `Bearer ${number.token}`) {
      return graphError(401, {
        message: "Invalid OAuth access token - Cannot parse access token",
        type: "OAuthException",
        code: 190,
      });
    }
    let json: unknown;
    try {
      json = JSON.parse(r.body);
    } catch {
      json = undefined;
    }
    const parsed = r.headers["content-type"] === "application/json" ? SendSchema.safeParse(json) : undefined;
    if (parsed?.success !== true) {
      return graphError(400, {
        message: "(#100) Invalid parameter",
        type: "OAuthException",
        code: 100,
      });
    }
    const answer = this.answer(parsed.data);
    if (answer === "hang") return undefined;
    if (answer !== "accept")
      return answer.error === undefined
        ? { status: answer.status, body: {} }
        : graphError(answer.status, answer.error);
    const id = `wamid.${randomBytes(24).toString("base64")}`;
    this.messages.push({ id, phoneNumberId: number.phoneNumberId, body: parsed.data });
    const to = parsed.data.to.replace(/^\+/, "");
    return {
      status: 200,
      body: {
        messaging_product: "whatsapp",
        contacts: [{ input: parsed.data.to, wa_id: to }],
        messages: [{ id, message_status: "accepted" }],
      },
    };
  }

  /** The notification Meta sends for `status` of the accepted message `wamid`. */
  notification(wamid: string, status: "sent" | "delivered" | "read" | "failed"): Record<string, unknown> {
    const message = this.messages.find((m) => m.id === wamid);
    if (message === undefined) throw new Error(`the fake sent no message ${wamid}`);
    const number = this.numbers.get(message.phoneNumberId);
    return {
      object: "whatsapp_business_account",
      entry: [
        {
          id: WABA_ID,
          changes: [
            {
              value: {
                messaging_product: "whatsapp",
                metadata: {
                  display_phone_number: number?.displayPhoneNumber ?? "15550783881",
                  phone_number_id: message.phoneNumberId,
                },
                statuses: [
                  {
                    id: wamid,
                    status,
                    timestamp: String(Math.floor(Date.now() / 1000)),
                    recipient_id: message.body.to.replace(/^\+/, ""),
                    ...(status === "failed"
                      ? {
                          errors: [
                            {
                              code: 131026,
                              title: "Message undeliverable",
                              message: "Message undeliverable",
                              error_data: { details: "Message Undeliverable." },
                            },
                          ],
                        }
                      : {
                          pricing: { billable: true, pricing_model: "PMP", category: "authentication" },
                        }),
                  },
                ],
              },
              field: "messages",
            },
          ],
        },
      ],
    };
  }

  /**
   * POSTs Meta's notification of `status` for `wamid` to the webhook at `baseUrl`, signed with
   * the app secret of the message's number (or `secret`; null: unsigned).
   */
  deliver(
    baseUrl: string,
    wamid: string,
    status: "sent" | "delivered" | "read" | "failed",
    secret?: string | null,
  ): Promise<Response> {
    const message = this.messages.find((m) => m.id === wamid);
    const own = message === undefined ? undefined : this.numbers.get(message.phoneNumberId)?.appSecret;
    return postSigned(
      baseUrl,
      JSON.stringify(this.notification(wamid, status)),
      secret === undefined ? own : secret,
    );
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * A `DELIVERY_PROVIDERS` entry (docs/routing.md#whatsapp) of `number` at `graph`, sending the
 * approved template `verification_code`; `extra` adds fields (`languages`, `timeout_ms`, ...).
 */
export function whatsappEntry(
  name: string,
  graph: { url: string },
  number: GraphNumber,
  verifyToken: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    name,
    channel: "whatsapp",
    url: graph.url,
    phone_number_id: number.phoneNumberId,
    token: number.token,
    template: "verification_code",
    app_secret: number.appSecret,
    verify_token: verifyToken,
    ...extra,
  };
}

/** `X-Hub-Signature-256` of `raw` with `secret`, as Meta signs. */
export function hubSignature(raw: string | Buffer, secret: string): string {
  return `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`;
}

/** POSTs `raw` to the webhook at `baseUrl` as Meta does, signed with `secret` (null or undefined: unsigned). */
export function postSigned(
  baseUrl: string,
  raw: string,
  secret: string | null | undefined,
): Promise<Response> {
  return fetch(`${baseUrl}/v1/whatsapp/webhook`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(secret === null || secret === undefined
        ? {}
        : { "x-hub-signature-256": hubSignature(raw, secret) }),
    },
    body: raw,
  });
}

function graphError(status: number, error: GraphError): { status: number; body: unknown } {
  return { status, body: { error: { ...error, fbtrace_id: `A${randomBytes(9).toString("base64url")}` } } };
}
