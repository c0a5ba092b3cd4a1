import { z } from "zod";
import { clip } from "../errors.js";
import { postJson } from "./http-post.js";
import { languageOf } from "./locale.js";
import {
  DeliveryError,
  type DeliveryReceipt,
  type OutgoingSms,
  type SentSms,
  type SmsProvider,
} from "./provider.js";

/** A WhatsApp entry's Cloud API account (docs/routing.md#whatsapp). */
export interface WhatsAppAccount {
  /** The business phone number's id, which sends and which its status webhooks name. */
  phoneNumberId: string;
  /** The access token sent as `Authorization: Bearer`; never logged. */
  token: string;
  /** The approved authentication template's name (a copy-code button). */
  template: string;
  /** The key of the `X-Hub-Signature-256` HMAC of its status webhooks; never logged. */
  appSecret: string;
  /** What Meta's subscription handshake must give as `hub.verify_token`; never logged. */
  verifyToken: string;
  /** Meta's code of the template's translation by the message locale's language (`pt` → `pt_BR`). */
  languages: Readonly<Record<string, string>>;
  /** Meta's code of the translation for the other languages (`en_US`). */
  defaultLanguage: string;
}

const LABEL = "WhatsApp provider";

/**
 * Graph's error codes that say "slow down" rather than "never": throttling of the app (4), of the
 * business account (80007), of the number's throughput (130429), of a number flagged as spam
 * (131048), and of one sender and recipient pair (131056). Graph answers them with a 4xx.
 */
const THROTTLED = new Set([4, 80007, 130429, 131048, 131056]);

/** What a send's answer holds that we use: the message id its status webhooks name. */
const Sent = z.object({ messages: z.array(z.object({ id: z.string().min(1).max(256) })).min(1) });

/** Graph's error answer: `{error: {message, type, code, error_subcode, fbtrace_id}}`. */
const GraphError = z.object({
  error: z.object({
    message: z.string().optional(),
    type: z.string().optional(),
    code: z.number().int().optional(),
  }),
});

/**
 * Sends each code as the entry's authentication template through the WhatsApp Cloud API
 * (docs/routing.md#whatsapp): `POST {url}/{phone_number_id}/messages`, the code both in the body
 * and in the copy-code button. The message id Graph answers (`wamid.…`) is the provider id its
 * status webhooks name (src/delivery/whatsapp.ts), not `onReceipt`.
 */
export class WhatsAppProvider implements SmsProvider {
  readonly name: string;
  readonly longestSendMs: number;
  private readonly messagesUrl: string;

  constructor(
    private readonly spec: { name: string; url: string; timeoutMs: number; whatsapp: WhatsAppAccount },
  ) {
    this.name = spec.name;
    this.longestSendMs = spec.timeoutMs;
    this.messagesUrl = `${spec.url.replace(/\/+$/, "")}/${spec.whatsapp.phoneNumberId}/messages`;
  }

  async send(msg: OutgoingSms): Promise<SentSms> {
    const { code } = msg;
    if (code === undefined || code === "") {
      throw new DeliveryError(`${LABEL} needs the code of the message for its template`, false);
    }
    const account = this.spec.whatsapp;
    const text = [{ type: "text", text: code }];
    const answer = await postJson(
      LABEL,
      this.messagesUrl,
      {
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: msg.to.replace(/^\+/, ""),
        type: "template",
        template: {
          name: account.template,
          language: { code: this.languageFor(msg.locale) },
          components: [
            { type: "body", parameters: text },
            { type: "button", sub_type: "url", index: "0", parameters: text },
          ],
        },
      },
      this.spec.timeoutMs,
      { headers: { authorization: `Bearer ${account.token}` }, readRefusals: true },
    );
    if (answer.status < 200 || answer.status > 299) throw this.refusal(answer.status, answer.body, code);
    const sent = Sent.safeParse(parseJson(answer.body));
    // Taken without an id (never seen): its statuses cannot be matched, the send still counts.
    return { providerId: sent.success ? (sent.data.messages[0]?.id ?? msg.reference) : msg.reference };
  }

  /** Meta's code of the template's translation for `locale` (`fr-FR` → `languages.fr`). */
  private languageFor(locale: string): string {
    const { languages, defaultLanguage } = this.spec.whatsapp;
    return languages[languageOf(locale)] ?? defaultLanguage;
  }

  /**
   * Graph's refusal: for good on a 4xx, but throttling (429, or a throttling code); a 5xx may pass
   * later. The message names the status and Graph's code and text, never the code or the token.
   */
  private refusal(status: number, body: Buffer | undefined, code: string): DeliveryError {
    const parsed = GraphError.safeParse(parseJson(body));
    const graph = parsed.success ? parsed.data.error : undefined;
    const said = graph?.message;
    const why =
      said === undefined || said.includes(code) || said.includes(this.spec.whatsapp.token)
        ? ""
        : `: ${clip(said, 160)}`;
    const named = graph?.code === undefined ? "" : ` (Graph error ${graph.code}${why})`;
    const retryable =
      status >= 500 || status === 429 || (graph?.code !== undefined && THROTTLED.has(graph.code));
    return new DeliveryError(`${LABEL} answered ${status}${named}`, retryable);
  }

  onReceipt(_listener: (r: DeliveryReceipt) => void): void {
    // Its statuses come on the webhook (src/delivery/whatsapp.ts).
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function parseJson(body: Buffer | undefined): unknown {
  if (body === undefined) return undefined;
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}
