-- How often each documented REST route and MCP tool is called (/api/skills). Totals since
-- the row was created; the server adds its in-memory counts every few seconds.
CREATE TABLE skill_usage (
    surface        TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    calls          BIGINT  NOT NULL,
    errors         BIGINT  NOT NULL,
    last_used_ms   BIGINT  NOT NULL,
    PRIMARY KEY (surface, name)
);
