import { expect } from "chai";
import { checkPreludeModels, PRELUDE_ENUMS, type PreludeSample } from "../support/prelude-contract.js";

const CREATED = {
  id: "vrf_01jc0t6fwwfgfsq1md24mhyztj",
  method: "message",
  status: "success",
  channels: ["sms", "whatsapp"],
  metadata: { correlation_id: "order-42" },
  request_id: "3d19215e-2991-4a05-a41a-527314e6ff6a",
};

// One batch for the whole file: every program costs the compiler a fresh check.
const SAMPLES: PreludeSample[] = [
  { label: "conforming create", model: "VerificationCreateResponse", value: CREATED },
  {
    label: "blocked create",
    model: "VerificationCreateResponse",
    value: { id: "vrf_02", method: "message", status: "blocked", reason: "suspicious" },
  },
  {
    label: "extra field",
    model: "VerificationCreateResponse",
    value: { ...CREATED, expires_at: "2030-01-01" },
  },
  { label: "pending", model: "VerificationCreateResponse", value: { ...CREATED, status: "pending" } },
  { label: "no id", model: "VerificationCreateResponse", value: { method: "message", status: "success" } },
  { label: "null reason", model: "VerificationCreateResponse", value: { ...CREATED, reason: null } },
  { label: "null body", model: "VerificationCheckResponse", value: null },
  { label: "numeric id", model: "VerificationCreateResponse", value: { ...CREATED, id: 42 } },
  { label: "empty method", model: "VerificationCreateResponse", value: { ...CREATED, method: "" } },
  {
    label: "several problems",
    model: "VerificationCreateResponse",
    value: { method: "message", status: "pending", expires_at: "2030-01-01", metadata: { tag: "x" } },
  },
  { label: "checked", model: "VerificationCheckResponse", value: { status: "success", id: "vrf_01" } },
  {
    label: "V1 line type",
    model: "LookupLookupResponse",
    value: { phone_number: "+33612345678", line_type: "Mobile" },
  },
  {
    label: "V2 line type",
    model: "LookupLookupResponse",
    value: { phone_number: "+33612345678", line_type: "mobile" },
  },
];

describe("the @prelude.so/sdk contract checker", () => {
  let violations: string[];
  const of = (label: string) => violations.filter((v) => v.startsWith(`${label}: `));

  before(() => {
    violations = checkPreludeModels(SAMPLES);
  });

  it("prefixes every violation with the label of its sample", () => {
    const labels = SAMPLES.map((s) => s.label);
    for (const v of violations)
      expect(
        labels.some((l) => v.startsWith(`${l}: `)),
        v,
      ).to.be.true;
  });

  it("accepts answers that are exactly what the SDK's types say", () => {
    expect(of("conforming create")).to.deep.equal([]);
    expect(of("blocked create")).to.deep.equal([]);
    expect(of("checked")).to.deep.equal([]);
    expect(of("V2 line type")).to.deep.equal([]);
  });

  it("refuses a field the SDK does not declare", () => {
    expect(of("extra field")).to.have.length(1);
    expect(of("extra field")[0]).to.match(/^extra field: \$\.expires_at: .*'expires_at' does not exist/);
  });

  it("refuses a status outside the SDK's union", () => {
    expect(of("pending")).to.have.length(1);
    expect(of("pending")[0]).to.match(/^pending: \$\.status: Type '"pending"' is not assignable/);
  });

  it("refuses an answer without a required field", () => {
    expect(of("no id")).to.have.length(1);
    expect(of("no id")[0]).to.match(/^no id: \$: Property 'id' is missing/);
  });

  it("refuses null, in a field and as the whole answer", () => {
    expect(of("null reason")).to.have.length(1);
    expect(of("null reason")[0]).to.match(/^null reason: \$\.reason: Type 'null' is not assignable/);
    expect(of("null body")).to.have.length(1);
    expect(of("null body")[0]).to.match(/^null body: \$: Type 'null' is not assignable/);
  });

  it("refuses a number where the SDK says string", () => {
    expect(of("numeric id")).to.have.length(1);
    expect(of("numeric id")[0]).to.match(
      /^numeric id: \$\.id: Type 'number' is not assignable to type 'string'/,
    );
  });

  it("refuses an empty string where the SDK has a union of literals", () => {
    expect(of("empty method")).to.have.length(1);
    expect(of("empty method")[0]).to.match(/^empty method: \$\.method: Type '""' is not assignable/);
  });

  it("names every problem of one answer, not only the first TypeScript reports", () => {
    const found = of("several problems");
    expect(found.map((v) => v.split(": ")[1])).to.have.members([
      "$",
      "$.status",
      "$.expires_at",
      "$.metadata.tag",
    ]);
    expect(found.find((v) => v.includes(": $: "))).to.include("'id'");
  });

  it("refuses the V1 spelling of a line type", () => {
    expect(of("V1 line type")).to.have.length(1);
    expect(of("V1 line type")[0]).to.match(/^V1 line type: \$\.line_type: .*Did you mean '"mobile"'\?/);
  });

  it("answers nothing for no samples", () => {
    expect(checkPreludeModels([])).to.deep.equal([]);
  });

  it("reads the SDK's unions from its declarations", () => {
    expect([...PRELUDE_ENUMS.createStatus].sort()).to.deep.equal(["blocked", "retry", "success"]);
    expect(PRELUDE_ENUMS.lookupLineType).to.have.length(19);
    expect(PRELUDE_ENUMS.lookupLineType).to.include.members(["voice_mail", "isp", "mobile", "fixed_line"]);
    expect(PRELUDE_ENUMS.checkStatus).to.have.members(["success", "failure", "expired_or_not_found"]);
    expect(PRELUDE_ENUMS.lookupFlag).to.have.members(["ported", "temporary"]);
    expect(PRELUDE_ENUMS.channels).to.include.members(["sms", "whatsapp", "voice"]);
    expect(PRELUDE_ENUMS.createReason).to.include("suspicious");
    expect(PRELUDE_ENUMS.createMethod).to.have.members(["email", "message", "silent", "voice"]);
  });
});
