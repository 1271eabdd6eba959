package loadledger.nifi;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.nifi.serialization.record.DataType;
import org.apache.nifi.serialization.record.MapRecord;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordField;
import org.apache.nifi.serialization.record.RecordFieldType;
import org.apache.nifi.serialization.record.RecordSchema;
import org.apache.nifi.serialization.record.type.ArrayDataType;
import org.apache.nifi.serialization.record.type.ChoiceDataType;
import org.apache.nifi.serialization.record.type.RecordDataType;

/**
 * Plain values (maps, lists, strings, numbers, booleans, null) as the NiFi Records a record reader
 * (JsonTreeReader) hands to a record writer: a nested record is a MapRecord of its child schema,
 * an array an Object[], a map a Map. The schema is NiFi's RecordSchema of the topic's Avro schema
 * (AvroTypeUtil.createSchema).
 */
final class Records {
    private Records() {}

    /** The record of one event; values are taken as they are (no copy of strings). */
    static Record of(RecordSchema schema, Map<String, Object> values) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (RecordField f : schema.getFields()) {
            if (values.containsKey(f.getFieldName())) {
                out.put(f.getFieldName(), value(f.getDataType(), values.get(f.getFieldName())));
            }
        }
        return new MapRecord(schema, out);
    }

    @SuppressWarnings("unchecked")
    private static Object value(DataType type, Object v) {
        if (v == null) {
            return null;
        }
        RecordFieldType ft = type.getFieldType();
        if (ft == RecordFieldType.RECORD && v instanceof Map) {
            return of(((RecordDataType) type).getChildSchema(), (Map<String, Object>) v);
        }
        if (ft == RecordFieldType.ARRAY && v instanceof List) {
            DataType elem = ((ArrayDataType) type).getElementType();
            List<Object> list = (List<Object>) v;
            Object[] out = new Object[list.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = value(elem, list.get(i));
            }
            return out;
        }
        if (ft == RecordFieldType.MAP && v instanceof Map) {
            return new HashMap<>((Map<String, Object>) v);
        }
        if (ft == RecordFieldType.CHOICE) {
            for (DataType sub : ((ChoiceDataType) type).getPossibleSubTypes()) {
                if (sub.getFieldType() == RecordFieldType.RECORD && v instanceof Map) {
                    return value(sub, v);
                }
            }
        }
        return v;
    }
}
