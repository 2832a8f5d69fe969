// Reads a JSON array of texts on stdin; prints a JSON array with, for each text, what Jackson's
// ObjectMapper at its default StreamReadConstraints says of it: "" when it parses, else the error.
// Run with Java's source launcher and the jackson jars Kafka ships: java -cp 'libs/*' ReadJson.java
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;

public class ReadJson {
  public static void main(String[] args) throws Exception {
    // The outer array holds the texts as strings: only its string length limit matters, raised so
    // a large text is judged by the mapper below, at the defaults, and not by this wrapper.
    ObjectMapper outer = new ObjectMapper();
    outer.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxStringLength(Integer.MAX_VALUE).build());
    String[] texts = outer.readValue(System.in, String[].class);
    ObjectMapper mapper = new ObjectMapper();
    List<String> out = new ArrayList<>();
    for (String t : texts) {
      try {
        mapper.readTree(t);
        out.add("");
      } catch (Exception e) {
        String m = String.valueOf(e.getMessage());
        out.add(e.getClass().getSimpleName() + ": " + m.substring(0, Math.min(200, m.length())));
      }
    }
    System.out.print(outer.writeValueAsString(out));
  }
}
