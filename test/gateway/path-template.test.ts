import { expect } from "chai";
import { BadPathEncoding, matchTemplate, parseTemplate } from "../../src/gateway/path-template.js";

function match(template: string, path: string): Record<string, string> | undefined {
  const vars = matchTemplate(parseTemplate(template), path);
  return vars === undefined ? undefined : Object.fromEntries(vars);
}

describe("google.api.http path templates", function () {
  describe("parseTemplate", function () {
    it("reads literals, variables with their default single segment, and no verb", function () {
      const tpl = parseTemplate("/v1/things/{id}");
      expect(tpl).to.deep.equal({
        source: "/v1/things/{id}",
        segments: [{ kind: "literal", value: "v1" }, { kind: "literal", value: "things" }, { kind: "any" }],
        variables: [{ field: "id", from: 2, to: 3 }],
        verb: undefined,
      });
    });

    it("reads a multi-segment variable and a verb after it", function () {
      const tpl = parseTemplate("/v1/{name=shelves/*/books/*}:archive");
      expect(tpl.segments).to.deep.equal([
        { kind: "literal", value: "v1" },
        { kind: "literal", value: "shelves" },
        { kind: "any" },
        { kind: "literal", value: "books" },
        { kind: "any" },
      ]);
      expect(tpl.variables).to.deep.equal([{ field: "name", from: 1, to: 5 }]);
      expect(tpl.verb).to.equal("archive");
    });

    it("reads ** and dotted field paths", function () {
      const tpl = parseTemplate("/v1/{thing.id}/{path=files/**}");
      expect(tpl.segments).to.deep.equal([
        { kind: "literal", value: "v1" },
        { kind: "any" },
        { kind: "literal", value: "files" },
        { kind: "rest" },
      ]);
      expect(tpl.variables).to.deep.equal([
        { field: "thing.id", from: 1, to: 2 },
        { field: "path", from: 2, to: 4 },
      ]);
    });

    it("takes a colon before the last slash as part of a literal, not a verb", function () {
      const tpl = parseTemplate("/v1:beta/things");
      expect(tpl.segments).to.deep.equal([
        { kind: "literal", value: "v1:beta" },
        { kind: "literal", value: "things" },
      ]);
      expect(tpl.verb).to.equal(undefined);
    });

    for (const [template, error] of [
      ["v1/things", /must start with "\/"/],
      ["/v1/{id", /unclosed variable/],
      ["/v1/{Id}", /bad field path Id/],
      ["/v1/{1d}", /bad field path 1d/],
      ["/v1/{id}}", /bad field path/],
      ["/v1//things", /bad path segment ""/],
      ["/v1/things/", /bad path segment ""/],
      ["/v1/{name=}", /bad path segment ""/],
      ["/v1/{a=b/{c}}", /bad path segment "\{c\}"/],
      ["/v1/th=ings", /bad path segment "th=ings"/],
    ] as const) {
      it(`rejects the template ${template}`, function () {
        expect(() => parseTemplate(template)).to.throw(error);
      });
    }
  });

  describe("matchTemplate", function () {
    it("matches literals and binds a single-segment variable, fully percent-decoded", function () {
      expect(match("/v1/things/{id}", "/v1/things/%2B1415%2F%20x")).to.deep.equal({ id: "+1415/ x" });
      expect(match("/v1/things/{id}", "/v1/things/+1415")).to.deep.equal({ id: "+1415" });
    });

    it("does not match other literals, more or fewer segments, or an empty segment", function () {
      expect(match("/v1/things/{id}", "/v1/thing/abc")).to.equal(undefined);
      expect(match("/v1/things/{id}", "/v1/things")).to.equal(undefined);
      expect(match("/v1/things/{id}", "/v1/things/abc/def")).to.equal(undefined);
      expect(match("/v1/things/{id}", "/v1/things/")).to.equal(undefined);
      expect(match("/v1/things/{id}", "v1/things/abc")).to.equal(undefined);
    });

    it("binds a multi-segment variable as the matched path, keeping %2F", function () {
      expect(match("/v1/{name=shelves/*/books/*}", "/v1/shelves/s%2F1/books/b%20c")).to.deep.equal({
        name: "shelves/s%2F1/books/b c",
      });
      expect(match("/v1/{name=shelves/*/books/*}", "/v1/shelves/s1/books")).to.equal(undefined);
    });

    it("matches ** against zero, one or many segments", function () {
      expect(match("/v1/files/**", "/v1/files")).to.deep.equal({});
      expect(match("/v1/files/**", "/v1/files/a")).to.deep.equal({});
      expect(match("/v1/files/**", "/v1/files/a/b/c")).to.deep.equal({});
      expect(match("/v1/files/**", "/v1/other/a")).to.equal(undefined);
    });

    it("binds a variable with ** to the rest of the path, keeping %2F", function () {
      expect(match("/v1/{path=files/**}", "/v1/files/a/b%2Fc")).to.deep.equal({ path: "files/a/b%2Fc" });
      expect(match("/v1/{path=files/**}", "/v1/files")).to.deep.equal({ path: "files" });
    });

    it("matches ** followed by more segments", function () {
      expect(match("/v1/**/meta", "/v1/a/b/meta")).to.deep.equal({});
      expect(match("/v1/**/meta", "/v1/a/b")).to.equal(undefined);
    });

    it("requires the verb and binds the variable before it", function () {
      expect(match("/v1/things/{id}:undelete", "/v1/things/abc:undelete")).to.deep.equal({ id: "abc" });
      expect(match("/v1/things/{id}:undelete", "/v1/things/a:b:undelete")).to.deep.equal({ id: "a:b" });
      expect(match("/v1/things/{id}:undelete", "/v1/things/abc")).to.equal(undefined);
      expect(match("/v1/things/{id}:undelete", "/v1/things/abc:delete")).to.equal(undefined);
      expect(match("/v1/things/{id}:undelete", "/v1/things/:undelete")).to.equal(undefined);
      expect(match("/v1/things/{id}:undelete", "/v1/things/abc%3Aundelete")).to.equal(undefined);
    });

    it("keeps a colon in a variable of a template without a verb", function () {
      expect(match("/v1/things/{id}", "/v1/things/abc:undelete")).to.deep.equal({ id: "abc:undelete" });
    });

    it("binds dotted field paths by their full name", function () {
      expect(match("/v1/{thing.id}/items/{item_id}", "/v1/t1/items/i1")).to.deep.equal({
        "thing.id": "t1",
        item_id: "i1",
      });
    });

    it("throws BadPathEncoding for malformed percent-encoding in a segment it reads", function () {
      expect(() => matchTemplate(parseTemplate("/v1/things/{id}"), "/v1/things/%ZZ")).to.throw(
        BadPathEncoding,
        'malformed percent-encoding in path segment "%ZZ"',
      );
      expect(() => matchTemplate(parseTemplate("/v1/things/{id}"), "/v1/things/%E2%82")).to.throw(
        BadPathEncoding,
      );
    });

    it("does not read segments after a literal that differs", function () {
      expect(match("/v1/things/{id}", "/v2/things/%ZZ")).to.equal(undefined);
    });
  });
});
