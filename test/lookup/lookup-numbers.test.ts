import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

import { expect } from "chai";
import { getExampleNumber, parsePhoneNumberFromString, type NumberType } from "libphonenumber-js/max";
import examples from "libphonenumber-js/examples.mobile.json" with { type: "json" };

import { describeNumber, preloadNumberData } from "../../src/lookup/numbers.js";
import { NUMBER_TYPE_LINE_TYPES, lineTypeOf, parseE164, type ParsedNumber } from "../../src/phone/e164.js";
import { LINE_TYPES, isLineType } from "../../src/phone/line-types.js";

function parsed(e164: string): ParsedNumber {
  const result = parseE164(e164);
  expect(result, `${e164} should parse`).to.not.equal(undefined);
  return result!;
}

function libphonenumberType(e164: string): NumberType {
  return parsePhoneNumberFromString(e164)?.getType();
}

describe("lookup number facts", () => {
  before(async () => {
    await preloadNumberData();
  });

  describe("line types", () => {
    it("LINE_TYPES lists the specification's 19 line_type values in the specification's order", () => {
      expect(LINE_TYPES).to.deep.equal([
        "CallingCards",
        "FixedLine",
        "InternetServiceProvider",
        "LocalRate",
        "Mobile",
        "Other",
        "Pager",
        "PayPhone",
        "PremiumRate",
        "Satellite",
        "Service",
        "SharedCost",
        "ShortCodesCommercial",
        "TollFree",
        "UniversalAccess",
        "Unknown",
        "VPN",
        "VoiceMail",
        "Voip",
      ]);
    });

    it("isLineType accepts exactly the specification's spellings", () => {
      for (const value of LINE_TYPES) expect(isLineType(value), value).to.equal(true);
      for (const value of ["mobile", "MOBILE", "Fixed_Line", "VoIP", "Vpn", ""]) {
        expect(isLineType(value), value).to.equal(false);
      }
    });

    it("the mapping table names every libphonenumber type and maps each to a line type", () => {
      const allTypes: NonNullable<NumberType>[] = [
        "PREMIUM_RATE",
        "TOLL_FREE",
        "SHARED_COST",
        "VOIP",
        "PERSONAL_NUMBER",
        "PAGER",
        "UAN",
        "VOICEMAIL",
        "FIXED_LINE_OR_MOBILE",
        "FIXED_LINE",
        "MOBILE",
      ];
      expect(Object.keys(NUMBER_TYPE_LINE_TYPES).sort()).to.deep.equal([...allTypes].sort());
      for (const type of allTypes) expect(isLineType(NUMBER_TYPE_LINE_TYPES[type]), type).to.equal(true);
    });

    it("an undetermined libphonenumber type (undefined) maps to Unknown", () => {
      expect(lineTypeOf(undefined, "+33612345678", false)).to.equal("Unknown");
      expect(lineTypeOf(undefined, "+33612345678", true)).to.equal("Unknown");
    });

    const typed: [NonNullable<NumberType>, string, string][] = [
      ["MOBILE", "+33612345678", "Mobile"],
      ["FIXED_LINE", "+33123456789", "FixedLine"],
      ["TOLL_FREE", "+33800123456", "TollFree"],
      ["PREMIUM_RATE", "+33891234567", "PremiumRate"],
      ["SHARED_COST", "+33810123456", "SharedCost"],
      ["VOIP", "+33912345678", "Voip"],
      ["PERSONAL_NUMBER", "+447012345678", "Other"],
      ["PAGER", "+447600123456", "Pager"],
      ["UAN", "+443001234567", "UniversalAccess"],
      ["VOICEMAIL", "+41860123456789", "VoiceMail"],
    ];
    for (const [type, e164, lineType] of typed) {
      it(`libphonenumber ${type} (${e164}) is line type ${lineType}`, async () => {
        expect(libphonenumberType(e164)).to.equal(type);
        expect(parsed(e164).lineType).to.equal(lineType);
        expect((await describeNumber(parsed(e164))).lineType).to.equal(lineType);
      });
    }

    it("libphonenumber FIXED_LINE_OR_MOBILE without a known carrier (+12015550123, US) is Unknown", async () => {
      expect(libphonenumberType("+12015550123")).to.equal("FIXED_LINE_OR_MOBILE");
      const number = parsed("+12015550123");
      expect(number.countryCode).to.equal("US");
      expect(number.lineType).to.equal("Unknown");
      const facts = await describeNumber(number);
      expect(facts.carrier).to.equal("");
      expect(facts.lineType).to.equal("Unknown");
    });

    it("libphonenumber FIXED_LINE_OR_MOBILE with a known carrier (+18093000000, DO) is Mobile", async () => {
      expect(libphonenumberType("+18093000000")).to.equal("FIXED_LINE_OR_MOBILE");
      const number = parsed("+18093000000");
      expect(number.countryCode).to.equal("DO");
      expect(number.lineType).to.equal("Unknown");
      expect(await describeNumber(number)).to.deep.equal({
        carrier: "Viva",
        mcc: "370",
        mnc: "04",
        disposable: false,
        lineType: "Mobile",
      });
    });

    it("libphonenumber's example mobile numbers are Mobile", async () => {
      for (const country of ["DE", "GB", "IN", "BR", "JP", "FR"] as const) {
        const example = getExampleNumber(country, examples);
        expect(example, country).to.not.equal(undefined);
        const number = parsed(example!.number);
        expect(number.countryCode, country).to.equal(country);
        expect(number.lineType, country).to.equal("Mobile");
        expect((await describeNumber(number)).lineType, country).to.equal("Mobile");
      }
    });

    for (const e164 of ["+881612345678", "+881712345678"]) {
      it(`the Iridium number ${e164} (GMSS +8816/+8817) is Satellite, not libphonenumber's MOBILE`, async () => {
        expect(libphonenumberType(e164)).to.equal("MOBILE");
        const number = parsed(e164);
        expect(number.countryCode).to.equal("");
        expect(number.callingCode).to.equal("881");
        expect(number.lineType).to.equal("Satellite");
        expect(await describeNumber(number)).to.deep.equal({
          carrier: "iridium satellite",
          mcc: "",
          mnc: "",
          disposable: false,
          lineType: "Satellite",
        });
      });
    }

    it("an Inmarsat number (+870) is Satellite", () => {
      expect(parsed("+870773111632").lineType).to.equal("Satellite");
    });
  });

  describe("parsing", () => {
    it("+33612345678 is a French mobile with mcc 208 and a carrier", async () => {
      const number = parsed("+33612345678");
      expect(number).to.deep.equal({
        e164: "+33612345678",
        countryCode: "FR",
        callingCode: "33",
        lineType: "Mobile",
        nationalNumber: "612345678",
      });
      const facts = await describeNumber(number);
      // Google's carrier data assigns +33 61 to SFR; SFR's operational MNCs are 08 (MVNO), 09, 10, 11, 13.
      expect(facts).to.deep.equal({
        carrier: "SFR",
        mcc: "208",
        mnc: "09",
        disposable: false,
        lineType: "Mobile",
      });
    });

    it("+1555 is not a valid number", () => {
      expect(parseE164("+1555")).to.equal(undefined);
    });

    const rejected: [string, string][] = [
      ["spaces", "+33 6 12 34 56 78"],
      ["dashes", "+33-6-12-34-56-78"],
      ["the national format", "0612345678"],
      ["digits without +", "33612345678"],
      ["letters", "+33612345abc"],
      ["a leading 00 instead of +", "0033612345678"],
      ["a 0 right after +", "+0612345678"],
      ["the national trunk 0 after the calling code", "+330612345678"],
      ["more than 15 digits", "+3361234567812345"],
      ["surrounding whitespace", " +33612345678"],
      ["a trailing newline", "+33612345678\n"],
      ["a lone +", "+"],
      ["the empty string", ""],
    ];
    for (const [what, input] of rejected) {
      it(`rejects ${what} (${JSON.stringify(input)})`, () => {
        expect(parseE164(input)).to.equal(undefined);
      });
    }

    it("a non-geographic number (+800, universal freephone) has country code ''", () => {
      expect(parsed("+80012345678")).to.deep.equal({
        e164: "+80012345678",
        countryCode: "",
        callingCode: "800",
        lineType: "TollFree",
        nationalNumber: "12345678",
      });
    });
  });

  describe("carrier, mcc and mnc", () => {
    it("a number without a known carrier gives carrier '' and mnc '' but its country's mcc", async () => {
      expect(await describeNumber(parsed("+12015550123"))).to.include({ carrier: "", mcc: "310", mnc: "" });
      expect(await describeNumber(parsed("+33123456789"))).to.include({ carrier: "", mcc: "208", mnc: "" });
    });

    it("a carrier name ending with the country name matches the brand (Orange France ~ Orange → 208/01)", async () => {
      expect(await describeNumber(parsed("+33607123456"))).to.include({
        carrier: "Orange France",
        mcc: "208",
        mnc: "01",
      });
    });

    it("a carrier name matches the MCC/MNC operator name (Free Mobile → 208/15)", async () => {
      expect(await describeNumber(parsed("+33651123456"))).to.include({
        carrier: "Free Mobile",
        mcc: "208",
        mnc: "15",
      });
    });

    it("a brand with a parenthesised qualifier matches (O2 ~ 'O2 (UK)' → 234/02)", async () => {
      expect(await describeNumber(parsed("+447912345678"))).to.include({
        carrier: "O2",
        mcc: "234",
        mnc: "02",
      });
    });

    it("a carrier that no operational MCC/MNC entry names keeps the country's mcc and gives mnc ''", async () => {
      // Google says "T-Mobile"; the Wikipedia list's brand is "Telekom".
      expect(await describeNumber(parsed("+4915123456789"))).to.include({
        carrier: "T-Mobile",
        mcc: "262",
        mnc: "",
      });
    });

    it("a matched carrier gives its entry's mcc/mnc pair even outside the region's primary mcc", async () => {
      // Bermuda's own MCC is 350, but Cellular One (Bermuda) is listed as 310/59.
      const number = parsed("+14412000000");
      expect(number.countryCode).to.equal("BM");
      expect(await describeNumber(number)).to.include({ carrier: "Cellular One", mcc: "310", mnc: "59" });
      expect(await describeNumber(parsed("+14414001234"))).to.include({ carrier: "", mcc: "350", mnc: "" });
    });

    it("a region's mcc is its own MCC, not a neighbour's shared one (US 310, IN 404, PR 330, GB 234)", async () => {
      const cases: [string, string][] = [
        ["+12015550123", "310"],
        ["+911123456789", "404"],
        ["+17872345678", "330"],
        ["+442012345678", "234"],
      ];
      for (const [e164, mcc] of cases) expect((await describeNumber(parsed(e164))).mcc, e164).to.equal(mcc);
    });

    it("a non-geographic number has no mcc", async () => {
      expect(await describeNumber(parsed("+80012345678"))).to.include({ mcc: "", mnc: "" });
    });

    it("repeated lookups of one number give the same facts", async () => {
      const first = await describeNumber(parsed("+33612345678"));
      const second = await describeNumber(parsed("+33612345678"));
      expect(second).to.deep.equal(first);
    });
  });

  describe("disposable numbers", () => {
    function packageList(): string[] {
      const path = createRequire(import.meta.url).resolve("@ip1sms/disposable-phone-numbers");
      const data: unknown = JSON.parse(readFileSync(path, "utf8"));
      expect(data).to.be.an("object");
      return Object.keys(data as object);
    }

    it("a number from the package's own list is flagged disposable", async () => {
      const list = packageList();
      expect(list).to.include("33602254584");
      expect((await describeNumber(parsed("+33602254584"))).disposable).to.equal(true);

      const firstValid = list.find((digits) => parseE164(`+${digits}`) !== undefined);
      expect(firstValid).to.not.equal(undefined);
      expect((await describeNumber(parsed(`+${firstValid!}`))).disposable).to.equal(true);
    });

    it("an ordinary number is not flagged disposable", async () => {
      expect(packageList()).to.not.include("33612345678");
      expect((await describeNumber(parsed("+33612345678"))).disposable).to.equal(false);
    });
  });
});
