"""Any Kafka Streams app's topology as one document: read from the text its describe() prints
(`text`), or from the form a streams group's broker keeps (`stored`, KIP-1331), and drawn
(`diagram`); kstool's own topologies describe themselves as the same document."""
