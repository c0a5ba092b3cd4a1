import { z } from "zod";
import type { Secrets } from "../crypto/secrets.js";
import { quote } from "../errors.js";
import { FraudInputError } from "./policy.js";

/** What a page token of insights carries: the walk's query and the last group answered. */
const insightsPage = z
  .object({
    list: z.literal("insights"),
    groupBy: z.enum(["country", "network", "prefix"]),
    sinceMs: z.number().int(),
    untilMs: z.number().int(),
    /** The last group's sends and key: the next page starts after it. */
    after: z.tuple([z.number().int().min(0), z.string().max(200)]),
  })
  .strict();

/** What a page token of decisions carries: the walk's `since` and the last record's id. */
const decisionsPage = z
  .object({
    list: z.literal("decisions"),
    sinceMs: z.number().int().nullable(),
    after: z.string().regex(/^\d{1,20}-\d{1,20}$/),
  })
  .strict();

const pageSchema = z.discriminatedUnion("list", [insightsPage, decisionsPage]);
export type InsightsPage = z.infer<typeof insightsPage>;
export type DecisionsPage = z.infer<typeof decisionsPage>;
type Page = z.infer<typeof pageSchema>;

const PURPOSE = "fraud-page-token";
/** Longer than any token this module makes. */
const MAX_TOKEN_CHARS = 1024;
const PART = /^[A-Za-z0-9_-]+$/;

/**
 * The `page_token` of the fraud reports (docs/fraud.md#pages): the state of a walk, opaque to the
 * caller and signed with a key derived from SECRETS_KEY for the calling tenant, so that a token
 * changed, made up, or given by another account is refused as a bad parameter rather than read.
 */
export class PageTokens {
  constructor(private readonly secrets: Secrets) {}

  make(tenant: string, page: Page): string {
    const body = Buffer.from(JSON.stringify(page), "utf8").toString("base64url");
    return `${body}.${this.signature(tenant, body)}`;
  }

  insights(tenant: string, token: string): InsightsPage {
    const page = this.read(tenant, token);
    if (page.list !== "insights") throw notOurs(token);
    return page;
  }

  decisions(tenant: string, token: string): DecisionsPage {
    const page = this.read(tenant, token);
    if (page.list !== "decisions") throw notOurs(token);
    return page;
  }

  private read(tenant: string, token: string): Page {
    const [body, signature, extra] = token.split(".");
    if (
      token.length > MAX_TOKEN_CHARS ||
      extra !== undefined ||
      body === undefined ||
      signature === undefined ||
      !PART.test(body) ||
      !PART.test(signature) ||
      !this.secrets.matches(
        PURPOSE,
        `${tenant}\0${body}`,
        Buffer.from(signature, "base64url").toString("hex"),
      )
    ) {
      throw notOurs(token);
    }
    const parsed = pageSchema.safeParse(JSON.parse(Buffer.from(body, "base64url").toString("utf8")));
    // Signed by us, so well formed unless it came from another version of this module.
    if (!parsed.success) throw notOurs(token);
    return parsed.data;
  }

  private signature(tenant: string, body: string): string {
    return Buffer.from(this.secrets.hash(PURPOSE, `${tenant}\0${body}`), "hex").toString("base64url");
  }
}

function notOurs(token: string): FraudInputError {
  return new FraudInputError(
    "page_token",
    `${quote(token)} is not a next_page_token this list gave this account: leave it out for the first page`,
  );
}
